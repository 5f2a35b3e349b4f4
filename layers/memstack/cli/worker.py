"""``memstack worker``: run queued background jobs (extraction, consolidation) from the command line.

``memstack ingest`` without ``--sync`` answers once messages are durable and
leaves extraction jobs in the queue; ``memstack serve`` runs them in a worker
thread. Without a server, this command runs them: ``--once`` (the default)
drains what is queued and exits, ``--forever`` keeps polling.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from memstack.cli.app import UserError, console, open_service, print_json, settings_from_cli


def worker(
    forever: Annotated[
        bool, typer.Option("--forever/--once", help="keep polling, or drain and exit")
    ] = False,
    poll_seconds: Annotated[float, typer.Option(min=0.1, help="pause between polls with --forever")] = 1.0,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run queued extraction and consolidation jobs."""
    with open_service(settings_from_cli()) as service:
        queue = service.queue
        if queue is None:
            raise UserError("no job queue is configured (MEMSTACK_QUEUE_BACKEND)")
        dead_before = len(queue.dead_letters())
        started = time.perf_counter()
        if forever:
            console.print("running queued jobs; Ctrl-C to stop")
            try:
                while True:
                    queue.drain()
                    time.sleep(poll_seconds)
            except KeyboardInterrupt:
                pass
        else:
            queue.drain()
        dead = len(queue.dead_letters()) - dead_before
    summary = {"seconds": round(time.perf_counter() - started, 3), "newly_dead_lettered": dead}
    if as_json:
        print_json(summary)
    else:
        console.print(
            f"queue drained in {summary['seconds']} s"
            + (f"; {dead} job(s) failed every retry (see `memstack dlq list`)" if dead else "")
        )


def register(app: typer.Typer) -> None:
    app.command()(worker)
