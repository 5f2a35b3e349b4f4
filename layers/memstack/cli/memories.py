"""``memstack memories --user U``: what memstack currently knows about a user."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from rich.table import Table

from memstack.api.routes_memories import memory_out
from memstack.cli.app import (
    checked_user,
    console,
    open_service,
    print_json,
    settings_from_cli,
    tenant_or_default,
)
from memstack.cli.when import when_said
from memstack.models import Kind, ListOrder, MemoryFilters, Tier


class Order(StrEnum):
    """``models.ListOrder`` as the choices typer shows."""

    created_at = "created_at"
    event_time = "event_time"


def memories(
    user: Annotated[str, typer.Option("--user", "-u", callback=checked_user)],
    tenant: Annotated[str | None, typer.Option()] = None,
    tier: Annotated[Tier | None, typer.Option(help="stm or ltm")] = None,
    kind: Annotated[Kind | None, typer.Option()] = None,
    category: Annotated[
        str | None,
        typer.Option(help="one of the tenant's categories (built-in or its own: memstack config show)"),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
    order: Annotated[
        Order,
        typer.Option(help="created_at: newest written first; event_time: newest event first (else written)"),
    ] = Order.created_at,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List a user's current memories, newest first (by write or event time)."""
    settings = settings_from_cli()
    how: ListOrder = "event_time" if order is Order.event_time else "created_at"
    with open_service(settings) as service:
        t = tenant_or_default(tenant, settings)
        records, cursor = service.list(
            t, user, MemoryFilters(tier=tier, kind=kind, category=category), limit, order=how
        )
        when = when_said(service, t, user, records)
    if as_json:
        print_json({"memories": [memory_out(r) for r in records], "next_cursor": cursor})
        return
    if not records:
        console.print(f"no memories for user {user}")
        return
    table = Table(title=f"memories of {user} ({len(records)}{'+' if cursor else ''})", title_justify="left")
    # Short columns never wrap, so the content gets the width on a narrow terminal;
    # ids are long and only useful to programs: --json has them.
    for col in ("tier", "kind", "category", "v", "when"):
        table.add_column(col, no_wrap=True, overflow="ellipsis")
    table.add_column("content", overflow="fold", ratio=1)
    for r in records:
        table.add_row(
            str(r.tier),
            str(r.kind),
            str(r.category or "-"),
            str(r.version),
            when[r.id].strftime("%Y-%m-%d"),
            f"{r.speaker}: {r.content}" if r.speaker and r.tier == Tier.STM else r.content,
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(memories)
