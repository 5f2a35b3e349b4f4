"""The ``memstack`` command. Each command group lives in its own module and registers here."""

from __future__ import annotations

import sys

from memstack.cli import (
    bench,
    config,
    consolidate,
    cost,
    dlq,
    ingest,
    jobs,
    mcp,
    memories,
    migrate,
    models,
    openapi,
    opensearch,
    reembed,
    search,
    serve,
    transfer,
    worker,
)
from memstack.cli import eval as eval_cmd
from memstack.cli.app import app, run

for module in (
    ingest,
    memories,
    search,
    eval_cmd,
    serve,
    mcp,
    openapi,
    cost,
    consolidate,
    dlq,
    config,
    jobs,
    worker,
    opensearch,
    transfer,
    migrate,
    reembed,
    models,
    bench,
):
    module.register(app)


def main() -> None:
    sys.exit(run())
