"""``memstack serve``: the REST API on this machine (embedded backend by default).

Besides the HTTP server it runs what AWS runs beside the API: the job queue
worker (extraction, consolidation jobs) and, every
``MEMSTACK_CONSOLIDATION_INTERVAL_SECONDS``, the consolidation scheduler
(what EventBridge triggers in AWS).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
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
    from memstack.api.wsgi_server import WsgiApi

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


MCP_EXTRA_HINT = "pip install 'memstack[integrations]'"


def mcp_installed() -> bool:
    """Whether ``/mcp`` can be served: the MCP SDK and a2wsgi come with the ``integrations`` extra."""
    return all(importlib.util.find_spec(name) is not None for name in ("mcp", "a2wsgi"))


def mount_mcp_if_available(api: WsgiApi, settings: Settings, host: str) -> Callable[[], None]:
    """``/mcp`` on the server when the MCP SDK is installed; returns how to stop it."""
    if not mcp_installed():
        logger.info("mcp_unavailable", extra={"event": "mcp_unavailable", "hint": MCP_EXTRA_HINT})
        return lambda: None
    from memstack.integrations.mcp_http import mount_mcp

    return mount_mcp(api, settings, host).close


def print_banner(base: str, settings: Settings, workers: int, *, mcp_served: bool) -> None:
    keys = settings.api_key_map()
    hint = " (dev key: dev-key)" if "dev-key" in keys else f" ({len(keys)} API keys configured)"
    processes = f"  {workers} worker processes" if workers > 1 else ""
    # Only an endpoint that is served is announced: without the extra, /mcp is a 404.
    mcp = f"MCP: {base}/mcp" if mcp_served else f"MCP: off ({MCP_EXTRA_HINT})"
    console.print(
        f"memstack API on {base}  browser: {base}/ui  docs: {base}/docs  {mcp}{hint}{processes}",
        highlight=False,
        markup=False,  # "[integrations]" is text, not a style
    )


@contextmanager
def _no_jobs() -> Iterator[None]:
    yield


def _stop_on_signals() -> None:
    """SIGTERM and SIGINT stop this process's server as Ctrl-C does, and it says so.

    Left alone, SIGTERM ends a Python process at once (nothing said, nothing
    closed), and a process a shell starts in the background inherits an
    ignored SIGINT, so neither stopped a ``--workers`` server's processes.
    The first signal ends ``server.run()`` (waitress returns on
    KeyboardInterrupt) and the ``finally`` blocks close everything; a second
    one while that runs is ignored, so it cannot cut the cleanup short.
    """
    stopping = threading.Event()

    def stop(signum: int, _frame: object) -> None:
        if stopping.is_set():
            return
        stopping.set()
        console.print(f"{signal.Signals(signum).name} received: stopping", highlight=False)
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)


def _run(
    settings: Settings,
    *,
    host: str,
    port: int,
    threads: int,
    sock: socket.socket | None = None,
    background: bool = True,
    announce: bool = True,
) -> None:
    """One server process: the API on ``threads`` threads, and (``background``) the job worker."""
    from memstack.api.wsgi_server import make_server

    if threading.current_thread() is threading.main_thread():  # only there can a handler be set
        _stop_on_signals()
    stop = threading.Event()
    with open_service(settings) as service, background_jobs(service) if background else _no_jobs():
        # Extraction and consolidation jobs run in this process while the server is up.
        timer = (
            _schedule_consolidation(service, settings.scheduler.consolidation_interval_seconds, stop)
            if background
            else None
        )
        server, api = make_server(service, settings, host=host, port=port, threads=threads, sock=sock)
        close_mcp = mount_mcp_if_available(api, settings, host)
        if announce:
            base = f"http://{server.effective_host}:{server.effective_port}"
            print_banner(base, settings, 1, mcp_served=mcp_installed())
        try:
            server.run()  # returns after Ctrl-C (waitress stops its workers itself)
        finally:
            stop.set()
            server.close()
            if timer is not None:
                timer.join(timeout=5)
            close_mcp()
            api.close()
            if announce:
                console.print("stopped")


def _run_processes(settings: Settings, *, host: str, port: int, threads: int, workers: int) -> None:
    """``workers`` server processes accepting on one socket bound here; the first runs the jobs.

    A search holds the GIL for most of its CPU time, so threads alone keep one
    core busy; processes use them all. Each has its own SQLite connections and
    index cache (memory grows with the workers). Ctrl-C or SIGTERM stops them all.
    """
    sock = socket.create_server((host, port), backlog=1024)
    sock.set_inheritable(True)
    base = f"http://{host}:{sock.getsockname()[1]}"
    children = []
    for index in range(workers):
        pid = os.fork()
        if pid == 0:  # the child: one ordinary server on the shared socket
            code = 0
            try:
                _run(
                    settings,
                    host=host,
                    port=port,
                    threads=threads,
                    sock=sock,
                    background=index == 0,
                    announce=False,
                )
            except KeyboardInterrupt:
                pass
            except BaseException:
                logger.exception("a memstack serve worker process failed")
                code = 1
            finally:
                os._exit(code)
        children.append(pid)
    sock.close()  # the children accept on it; this process only waits for them
    print_banner(base, settings, workers, mcp_served=mcp_installed())

    def stop(signum: int, _frame: object) -> None:
        # SIGTERM to each process: its own handler stops it (an inherited, ignored SIGINT cannot).
        console.print(
            f"{signal.Signals(signum).name} received: stopping {workers} processes", highlight=False
        )
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    for pid in children:  # a signal runs ``stop`` and the wait goes on until each has exited
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    console.print("stopped")


def serve(
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port (0 picks a free one)")] = 8000,
    threads: Annotated[int, typer.Option(min=1, max=256, help="worker threads per process")] = 8,
    workers: Annotated[
        int, typer.Option(min=1, max=64, help="server processes (use the cores: a search is mostly Python)")
    ] = 1,
) -> None:
    """Serve the REST API (memory browser at /ui, Swagger at /docs) and run background jobs until Ctrl-C."""
    settings = settings_from_cli()
    if workers == 1:
        _run(settings, host=host, port=port, threads=threads)
    else:
        _run_processes(settings, host=host, port=port, threads=threads, workers=workers)


def register(app: typer.Typer) -> None:
    app.command()(serve)
