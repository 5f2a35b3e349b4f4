"""The Typer application, shared options, and the one place user mistakes become one-line errors."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from memstack import __version__
from memstack.errors import MemstackError
from memstack.extras import missing_module_hint
from memstack.factory import build_service
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

app = typer.Typer(
    name="memstack",
    help="Long-term memory for conversational AI agents (embedded store by default).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=False,
)
console = Console()


def _print_version(value: bool) -> None:
    if value:
        print(f"memstack {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="log each pipeline step (JSON on stderr)"),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="print the version and exit"
    ),
) -> None:
    # The library logs one structured line per search and job (what CloudWatch
    # wants); at a terminal that is noise unless asked for.
    logging.getLogger("memstack").setLevel(logging.INFO if verbose else logging.WARNING)


# soft_wrap: an error stays one line (scripts grep it), whatever the terminal width.
err_console = Console(stderr=True, soft_wrap=True)


class UserError(Exception):
    """A mistake in how the command was called: printed as one line, exit code 2."""


def settings_from_cli(**overrides: Any) -> Settings:
    return load_settings(**{k: v for k, v in overrides.items() if v is not None})


@contextmanager
def open_service(settings: Settings | None = None) -> Iterator[MemoryService]:
    service = build_service(settings or load_settings())
    try:
        yield service
    finally:
        service.close()


def checked_user(value: str | None) -> str | None:
    """A ``--user`` under the API's rule for user ids: data stored under any other id could
    never be reached over REST or MCP (``"bad user"``, ``../../etc``)."""
    from memstack.api.schemas import ID_PATTERN

    if value is not None and (len(value) > 128 or not re.fullmatch(ID_PATTERN, value)):
        raise typer.BadParameter(
            f"{value!r} is not a user id the API accepts: 1-128 characters, letters and digits first, "
            "then letters, digits and . _ @ : + = -"
        )
    return value


def tenant_or_default(tenant: str | None, settings: Settings) -> str:
    return tenant or settings.default_tenant


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n")


def plural(count: int, word: str) -> str:
    """``1 message``, ``2 messages``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def plain_metavars(command: Any) -> Any:
    """Help that reads like a command line: ``--user USER``, and flags without a ``<bool>``.

    (The click command Typer builds, matched by shape: Typer vendors its own click.)
    """
    for param in command.params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
        elif param.metavar is None and not getattr(
            getattr(param, "type_descriptor", None), "is_choice", False
        ):
            param.metavar = (param.name or "value").upper()
        if getattr(param, "param_type_name", "") == "argument":
            # An argument's name already says what it is ("QUERY"); "<str>" after it says nothing.
            param.display_type_rich = lambda ctx: None
    for sub in getattr(command, "commands", {}).values():
        plain_metavars(sub)
    return command


def run(args: list[str] | None = None) -> int:
    """Run the app (on ``args``, default the command line); known failures become one clear line
    on stderr and a non-zero exit code."""
    try:
        # Without standalone mode click returns a command's exit code (typer.Exit) instead of exiting.
        command = plain_metavars(typer.main.get_command(app))
        code = command.main(args=args, prog_name="memstack", standalone_mode=False)
        return int(code) if isinstance(code, int) else 0
    except SystemExit as exc:
        return int(exc.code or 0)
    except typer.Abort:
        err_console.print("aborted")
        return 130
    except UserError as exc:
        # escape: a message may name an extra, `memstack[integrations]`, which is not markup.
        err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
        return 2
    except MemstackError as exc:
        err_console.print(f"[red]error ({exc.code}):[/red] {exc.message}", highlight=False)
        return 1
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        err_console.print(f"[red]error:[/red] invalid {where or 'input'}: {first['msg']}", highlight=False)
        return 2
    except OSError as exc:
        err_console.print(f"[red]error:[/red] {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
        return 1
    except ModuleNotFoundError as exc:
        # An optional part this install left out (an extra): say which extra brings it.
        hint = missing_module_hint(exc)
        if hint is None:
            raise
        err_console.print(f"[red]error:[/red] {escape(hint)}", highlight=False)
        return 1
    except Exception as exc:
        # Usage errors come from the click that Typer vendors; match them by
        # shape rather than by a private import path.
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            err_console.print(f"[red]error:[/red] {exc.format_message()}", highlight=False)
            return int(exc.exit_code)
        raise
    return 0
