"""``memstack search QUERY --user U``: the retrieval pipeline from the command line."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from memstack.api.routes_memories import memory_out
from memstack.cli.app import (
    UserError,
    checked_user,
    console,
    open_service,
    print_json,
    settings_from_cli,
    tenant_or_default,
)
from memstack.cli.when import when_said
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import MemoryFilters


def search(
    query: Annotated[str, typer.Argument(help="what to look for")],
    user: Annotated[str, typer.Option("--user", "-u", callback=checked_user)],
    k: Annotated[int, typer.Option("--top-k", "--k", "-k", help="number of results (the API's top_k)")] = 10,
    session: Annotated[str | None, typer.Option("--session", "-s")] = None,
    tenant: Annotated[str | None, typer.Option()] = None,
    category: Annotated[
        str | None,
        typer.Option(help="one of the tenant's categories (built-in or its own: memstack config show)"),
    ] = None,
    explain: Annotated[bool, typer.Option(help="show every stage's score and rank")] = False,
    min_score: Annotated[
        float | None,
        typer.Option("--min-score", help="only results at least this likely to be relevant (0-1)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Search one user's memories (BM25 + vector, fused)."""
    if not query.strip():
        raise UserError("the query is empty")
    settings = settings_from_cli()
    if not 1 <= k <= settings.api.max_top_k:
        raise UserError(f"--top-k must be between 1 and {settings.api.max_top_k}")
    t = tenant_or_default(tenant, settings)
    if min_score is not None and not 0.0 <= min_score <= 1.0:
        raise UserError(f"--min-score must be between 0 and 1, got {min_score}")
    with open_service(settings) as service:
        result = service.search(
            SearchRequest(
                tenant=t,
                user_id=user,
                query=query,
                top_k=k,
                filters=MemoryFilters(session_id=session, category=category),
                explain=explain,
                min_score=min_score,
            )
        )
        said = when_said(service, t, user, [h.record for h in result.hits])
    if as_json:
        print_json(
            {
                "results": [
                    {
                        **memory_out(h.record),  # the API's shape: no internal keys, agent_id
                        "score": h.score,
                        "superseded": h.superseded,
                        **({"stages": h.stages} if explain else {}),
                    }
                    for h in result.hits
                ],
                "evidence": result.evidence,
                "degraded": result.degraded,
            }
        )
        return
    if not result.hits:
        console.print(f"no memories match for user {user}")
        return
    title = f"{query!r}: top {len(result.hits)} for {user} (evidence {result.evidence:.2f})"
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("score", justify="right")
    table.add_column("tier")
    table.add_column("when")
    table.add_column("memory", overflow="fold")
    if explain:
        table.add_column("stages", overflow="fold")
    for rank, hit in enumerate(result.hits, start=1):
        r = hit.record
        when = said[r.id].strftime("%Y-%m-%d")
        text = f"{r.speaker}: {r.content}" if r.speaker else r.content
        tier = f"{r.tier} (superseded)" if hit.superseded else str(r.tier)
        row = [str(rank), f"{hit.score:.4f}", tier, when, text]
        if explain:
            row.append(", ".join(f"{k}={v:.3f}" for k, v in hit.stages.items()))
        table.add_row(*row)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command()(search)
