"""``memstack job ID``: one background job's state, as ``GET /v1/jobs/{id}`` answers it."""

from __future__ import annotations

from typing import Annotated

import typer

from memstack.api.routes_jobs import status_out
from memstack.cli.app import console, open_service, print_json, settings_from_cli, tenant_or_default


def job(
    job_id: Annotated[
        str, typer.Argument(help="a job id, as an add (or `memstack ingest --json`) printed it")
    ],
    tenant: Annotated[str | None, typer.Option()] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Show whether a background job is queued, running, done or failed (and why)."""
    settings = settings_from_cli()
    with open_service(settings) as service:
        state = status_out(service.job(tenant_or_default(tenant, settings), job_id))
    if as_json:
        print_json(state)
        return
    console.print(
        f"job {state['id']} ({state['type']} for user {state['user_id']}): [bold]{state['status']}[/bold] "
        f"after {state['attempts']} attempt(s), last change {state['updated_at']}"
    )
    if state["error"]:
        console.print(f"{state['error']['code']}: {state['error']['message']}")


def register(app: typer.Typer) -> None:
    app.command()(job)
