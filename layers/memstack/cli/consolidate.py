"""``memstack consolidate``: fold short-term turns into long-term memory, for one user or every due user."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from memstack.cli.app import (
    checked_user,
    console,
    open_service,
    print_json,
    settings_from_cli,
    tenant_or_default,
)

_COUNTS = ("read", "resumed", "groups", "summaries", "syntheses", "written", "updated", "unchanged", "marked")


def consolidate(
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", help="one user (default: every due user)", callback=checked_user),
    ] = None,
    tenant: Annotated[str | None, typer.Option()] = None,
    wait: Annotated[bool, typer.Option(help="without --user: run the fanned-out jobs here and wait")] = True,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Summarise and synthesise STM into LTM; report what was read and written."""
    settings = settings_from_cli()
    with open_service(settings) as service:
        if user is not None:
            report = service.consolidate(tenant_or_default(tenant, settings), user, sync=True)
            if as_json:
                print_json(report)
                return
            table = Table(title=f"consolidation of {user}: {report['status']}", title_justify="left")
            for name in _COUNTS:
                table.add_column(name, justify="right")
            table.add_row(*(str(report[name]) for name in _COUNTS))
            console.print(table)
            return
        # Every due user: the scheduler's pass (housekeeping, then one job per user).
        result = service.schedule_consolidation()
        if wait and service.queue is not None and settings.queue_backend == "local":
            result["drained"] = service.queue.drain()
            now_pending = {(t, u): n for t, u, n, _ in service.stm.users_with_pending(datetime.now(UTC))}
            for entry in result["users"]:
                entry["pending_after"] = now_pending.get((entry["tenant"], entry["user_id"]), 0)
    if as_json:
        print_json(result)
        return
    console.print(
        f"purged {result['purged_expired']} expired STM entries; {result['jobs']} consolidation job(s) sent",
        highlight=False,
    )
    for entry in result["users"]:
        after = f", {entry['pending_after']} left" if "pending_after" in entry else ""
        console.print(
            f"  {entry['tenant']}/{entry['user_id']}: {entry['pending']} pending ({entry['reason']}){after}",
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    app.command()(consolidate)
