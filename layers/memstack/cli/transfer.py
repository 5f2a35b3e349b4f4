"""``memstack export`` / ``memstack import``: a user's memories as JSON lines, on any backend."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from memstack.cli.app import (
    UserError,
    checked_user,
    err_console,
    open_service,
    print_json,
    settings_from_cli,
    tenant_or_default,
)
from memstack.domain.transfer import export_lines, import_lines
from memstack.models import MemoryFilters


def export(
    user: Annotated[str, typer.Option("--user", "-u", help="whose memories", callback=checked_user)],
    tenant: Annotated[str | None, typer.Option()] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="file to write (default: stdout)")] = None,
) -> None:
    """Write every version of a user's memories, with embeddings, as JSON lines."""
    settings = settings_from_cli()
    tenant_id = tenant_or_default(tenant, settings)
    where = f"the data dir {settings.data_dir.resolve()} (MEMSTACK_DATA_DIR)"
    if settings.store_backend == "embedded" and not settings.db_path.exists():
        # Opening the store would create an empty one here: say where memstack looked instead.
        raise UserError(f"no memstack store in {where}: run where the data is, or set MEMSTACK_DATA_DIR")
    with open_service(settings) as service:
        if not service.store.list(tenant_id, user, MemoryFilters(include_superseded=True), 1)[0]:
            place = where if settings.store_backend == "embedded" else f"the {settings.store_backend} store"
            raise UserError(f"user {user!r} (tenant {tenant_id!r}) has no memories in {place}")
        lines = export_lines(service.store, tenant_id, user, service.embedder)
        if out is None:
            for line in lines:
                sys.stdout.write(line + "\n")
            return
        written = 0
        with out.open("w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line + "\n")
                written += 1
    # The header line is not a record.
    err_console.print(f"exported {max(written - 1, 0)} records of {user} to {out}", highlight=False)


def import_(
    path: Annotated[Path, typer.Argument(help="a file `memstack export` wrote ('-' for stdin)")],
    user: Annotated[
        str | None,
        typer.Option(
            "--user", "-u", help="import as this user (default: as exported)", callback=checked_user
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="import into this tenant (default: as exported)")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Load an export into the configured store (ids are kept: importing twice skips what is there)."""
    if str(path) != "-" and not path.is_file():
        raise UserError(f"no such file: {path}")
    settings = settings_from_cli()
    with open_service(settings) as service:
        if str(path) == "-":
            report = import_lines(
                service.store,
                sys.stdin,
                service.embedder,
                settings.embedding.coarse_dim,
                tenant=tenant,
                user_id=user,
            )
        else:
            with path.open(encoding="utf-8") as fh:
                report = import_lines(
                    service.store,
                    fh,
                    service.embedder,
                    settings.embedding.coarse_dim,
                    tenant=tenant,
                    user_id=user,
                )
        # A bulk load leaves the planner's statistics behind (postgres): refresh them.
        analyze = getattr(service.store, "analyze", None)
        if report.imported and callable(analyze):
            analyze()
    if as_json:
        print_json(report.as_dict())
        return
    err_console.print(
        f"imported {report.imported} records into the {settings.store_backend} store"
        f" ({report.skipped_existing} already there, {report.reembedded} re-embedded)",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command()(export)
    app.command("import")(import_)
