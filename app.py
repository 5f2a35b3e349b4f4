#!/usr/bin/env python3
"""The CDK app: ``cdk synth -c tier=small|medium|large`` (defaults in cdk.json)."""

from __future__ import annotations

import sys

from stacks.config import ConfigError
from stacks.memstack_stack import create_app


def main() -> int:
    try:
        app, _ = create_app()
    except ConfigError as exc:
        sys.stderr.write(f"memstack synth: {exc}\n")
        return 1
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
