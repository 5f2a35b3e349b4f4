"""``memstack serve``: the REST API on this machine (embedded backend by default).

Besides the HTTP server it runs what AWS runs beside the API: the job queue
worker (extraction, consolidation jobs) and, every
``MEMSTACK_CONSOLIDATION_INTERVAL_SECONDS``, the consolidation scheduler
(what EventBridge triggers in AWS).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from aws_lambda_powertools import Logger

from memstack.cli.app import console, open_service, settings_from_cli
from memstack.service import MemoryService
from memstack.settings import Settings

if TYPE_CHECKING:
    from memstack.api.local_server import LocalApi

logger = Logger(service="memstack-api")


def _schedule_consolidation(
    service: MemoryService, every: float, stop: threading.Event
) -> threading.Thread | None:
    schedule = getattr(service, "schedule_consolidation", None)
    if not callable(schedule):
        return None

    def loop() -> None:
        while not stop.wait(every):
            try:
                report = schedule()
                logger.info(
                    "consolidation_scheduled", extra={"event": "consolidation_scheduled", "report": report}
                )
            except Exception:  # the server keeps serving; the next tick retries
                logger.exception("consolidation scheduler failed")

    thread = threading.Thread(target=loop, name="memstack-consolidation-timer", daemon=True)
    thread.start()
    return thread


@contextmanager
def background_jobs(service: MemoryService) -> Iterator[None]:
    """Run queued extraction and consolidation jobs in this process while the block runs."""
    start_worker = getattr(service.queue, "start_worker", None)
    if callable(start_worker):
        start_worker()
    try:
        yield
    finally:
        stop_worker = getattr(service.queue, "stop_worker", None)
        if callable(stop_worker):
            stop_worker()


def mount_mcp_if_available(api: LocalApi, settings: Settings, host: str) -> Callable[[], None]:
    """``/mcp`` on the server when the MCP SDK is installed; returns how to stop it."""
    try:
        from memstack.integrations.mcp_http import mount_mcp
    except ImportError:
        logger.info("mcp_unavailable", extra={"event": "mcp_unavailable", "hint": "pip install mcp a2wsgi"})
        return lambda: None
    return mount_mcp(api, settings, host).close


def serve(
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0 picks a free one)")] = 8000,
    threads: Annotated[int, typer.Option(min=1, max=256, help="worker threads")] = 8,
) -> None:
    """Serve the REST API (Swagger UI at /docs) and run background jobs until Ctrl-C."""
    from memstack.api.local_server import make_server

    settings = settings_from_cli()
    stop = threading.Event()
    # Extraction and consolidation jobs run in this process while the server is up.
    with open_service(settings) as service, background_jobs(service):
        timer = _schedule_consolidation(service, settings.consolidation_interval_seconds, stop)
        server, api = make_server(service, settings, host=host, port=port, threads=threads)
        close_mcp = mount_mcp_if_available(api, settings, host)
        base = f"http://{server.effective_host}:{server.effective_port}"
        keys = settings.api_key_map()
        hint = " (dev key: dev-key)" if "dev-key" in keys else f" ({len(keys)} API keys configured)"
        console.print(f"memstack API on {base}  docs: {base}/docs  MCP: {base}/mcp{hint}", highlight=False)
        try:
            server.run()  # returns after Ctrl-C (waitress stops its workers itself)
        finally:
            stop.set()
            server.close()
            if timer is not None:
                timer.join(timeout=5)
            close_mcp()
            api.close()
            console.print("stopped")


def register(app: typer.Typer) -> None:
    app.command()(serve)
