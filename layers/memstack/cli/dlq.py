"""``memstack dlq list`` / ``memstack dlq redrive``: jobs that failed every retry, on either queue backend."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from memstack.cli.app import UserError, console, open_service, print_json, settings_from_cli
from memstack.ports.queue import JobQueue

dlq_app = typer.Typer(
    help="Dead-lettered jobs: list them, or send them back to their queue.", no_args_is_help=True
)


def _queue(queue: JobQueue | None) -> JobQueue:
    if queue is None:
        raise UserError("no job queue is configured (MEMSTACK_QUEUE_BACKEND)")
    return queue


def _describe(job: Any) -> str:
    if isinstance(job, dict):
        return f"{job.get('type', '?')} {job.get('tenant', '?')}/{job.get('user_id', '?')}"
    return json.dumps(job)[:80]  # a message that is not a job at all


@dlq_app.command("list")
def list_dead(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show every dead-lettered job."""
    with open_service(settings_from_cli()) as service:
        dead = _queue(service.queue).dead_letters()
    if as_json:
        print_json({"dead_letters": dead})
        return
    if not dead:
        console.print("no dead-lettered jobs")
        return
    table = Table(title=f"dead-lettered jobs ({len(dead)})", title_justify="left")
    for col in ("id", "job", "attempts", "error"):
        table.add_column(col, overflow="fold")
    for d in dead:
        table.add_row(str(d["id"]), _describe(d["job"]), str(d["attempts"]), str(d.get("error") or "-"))
    console.print(table)


@dlq_app.command("redrive")
def redrive(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Send every dead-lettered job back to its queue (run ``dlq list`` first to see them)."""
    with open_service(settings_from_cli()) as service:
        moved = _queue(service.queue).redrive()
    if as_json:
        print_json({"redriven": moved})
    else:
        console.print(f"redrove {moved} job(s)")


def register(app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")
