"""``memstack ingest FILE|-``: JSON lines of messages into one user's memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from memstack.cli.app import (
    UserError,
    checked_user,
    console,
    open_service,
    plural,
    print_json,
    settings_from_cli,
    tenant_or_default,
)
from memstack.models import Message, Scope

BATCH = 32
# --sync waits this long per batch for its extraction (the API waits MEMSTACK_SYNC_TIMEOUT_SECONDS).
SYNC_WAIT = 900.0


def read_messages(stream: TextIO, source: str, timezone: str = "UTC") -> list[Message]:
    """Parse JSON lines; naive timestamps are read in ``timezone`` (MEMSTACK_TIMEZONE)."""
    messages = []
    for lineno, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{source}:{lineno}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise UserError(f"{source}:{lineno}: expected a JSON object with at least 'content'")
        try:
            messages.append(Message.model_validate(data, context={"timezone": timezone}))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "message"
            raise UserError(f"{source}:{lineno}: {field}: {first['msg']}") from None
    return messages


def ingest(
    file: Annotated[str, typer.Argument(help="JSON-lines file of messages, or - for standard input")],
    user: Annotated[
        str, typer.Option("--user", "-u", help="user the messages belong to", callback=checked_user)
    ],
    session: Annotated[str | None, typer.Option("--session", "-s", help="conversation session id")] = None,
    tenant: Annotated[str | None, typer.Option(help="tenant (default: MEMSTACK_DEFAULT_TENANT)")] = None,
    scope: Annotated[
        Scope, typer.Option(help="USER (all sessions) or CONTEXT (this session only)")
    ] = Scope.USER,
    infer: Annotated[bool, typer.Option(help="run extraction into long-term memory")] = True,
    sync: Annotated[bool, typer.Option(help="wait until extraction has finished")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Store messages (one JSON object per line: content, role, speaker, timestamp, id)."""
    settings = settings_from_cli()
    if file == "-":
        messages = read_messages(sys.stdin, "<stdin>", settings.timezone)
    else:
        path = Path(file)
        if not path.is_file():
            raise UserError(f"no such file: {file}")
        with path.open(encoding="utf-8") as fh:
            messages = read_messages(fh, file, settings.timezone)
    if not messages:
        raise UserError(f"{file}: no messages found")
    accepted: list[str] = []
    job_ids: list[str] = []
    stored = queued = 0
    with open_service(settings) as service:
        t = tenant_or_default(tenant, settings)
        with Progress(
            TextColumn("ingesting"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=as_json or not console.is_terminal,
            transient=True,
        ) as progress:
            task = progress.add_task("ingest", total=len(messages))
            for start in range(0, len(messages), BATCH):
                batch = messages[start : start + BATCH]
                result = service.add(
                    t,
                    user,
                    batch,
                    session_id=session,
                    scope=scope,
                    infer=infer,
                    sync=sync,
                    sync_timeout=SYNC_WAIT,
                )
                accepted += result.accepted
                stored += len(result.stored)
                queued += result.queued
                job_ids += result.job_ids
                progress.advance(task, len(batch))
    summary = {
        "user_id": user,
        "tenant": t,
        "accepted": len(accepted),
        "stored": stored,
        "queued": queued,
        "job_ids": job_ids,
    }
    if as_json:
        print_json(summary)
    else:
        extraction = "extracted" if sync else "queued for extraction"
        console.print(
            f"ingested {plural(len(accepted), 'message')} for user [bold]{user}[/bold] "
            f"({stored} new, {len(accepted) - stored} already stored, {queued} {extraction})"
        )
        if queued and not sync:
            console.print(
                "extraction runs in the background of `memstack serve`; "
                "run `memstack worker` (or ingest with --sync) to process it now"
            )


def register(app: typer.Typer) -> None:
    app.command()(ingest)
