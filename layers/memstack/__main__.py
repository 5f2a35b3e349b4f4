"""``memstack`` and ``python -m memstack``: the CLI, or one line naming the extra it needs.

The command line lives in the ``server`` extra (typer, rich, …); a ``client``-only install
still answers ``--version`` and says what to install instead of a traceback.
"""

from __future__ import annotations

import sys

from memstack import __version__
from memstack.extras import missing_module_hint


def main() -> None:
    try:
        from memstack.cli import main as cli_main
    except ModuleNotFoundError as exc:
        hint = missing_module_hint(exc)
        if hint is None:
            raise
        if sys.argv[1:] == ["--version"]:
            print(f"memstack {__version__}")
            sys.exit(0)
        print(f"error: memstack's command line: {hint}", file=sys.stderr)
        sys.exit(1)
    cli_main()


if __name__ == "__main__":
    main()
