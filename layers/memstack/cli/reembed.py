"""``memstack reembed``: give every record of the store a vector from the configured embedder."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from memstack.cli.app import err_console, print_json, settings_from_cli
from memstack.domain.reembed import reembed as reembed_store


def reembed(
    tenant: Annotated[
        list[str] | None,
        typer.Option(help="a tenant to re-embed besides those the store lists (repeatable)"),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(help="where users' records wait to be re-embedded (default: <data dir>/reembed)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Re-embed the store with MEMSTACK_EMBEDDER (after switching embedders); run it again if it stops.

    Stop everything that writes to the store first (memstack serve, workers).
    """
    from memstack.factory import build_service

    settings = settings_from_cli()
    service = build_service(settings, embedder_check=False)  # it is here to mend the mismatch
    try:
        report = reembed_store(
            service.store,
            service.embedder,
            settings.embedding.coarse_dim,
            service.tenant_configs.store,
            workdir or settings.data_dir / "reembed",
            lambda: datetime.now(UTC),
            tenants=tenant,
        )
        analyze = getattr(service.store, "analyze", None)  # a bulk load leaves stale planner statistics
        if report.records and callable(analyze):
            analyze()
    finally:
        service.close()
    if as_json:
        print_json(report.as_dict())
        return
    err_console.print(
        f"re-embedded {report.reembedded} of {report.records} records of {report.users} users in "
        f"{report.tenants} tenants with {service.embedder.name}"
        + (f" ({report.resumed} resumed from a stopped run)" if report.resumed else ""),
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command()(reembed)
