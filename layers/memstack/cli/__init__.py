"""The ``memstack`` command. Each command group lives in its own module and registers here."""

from __future__ import annotations

import sys

from memstack.cli import ingest, memories, search
from memstack.cli.app import app, run

for module in (ingest, memories, search):
    module.register(app)


def main() -> None:
    sys.exit(run())
