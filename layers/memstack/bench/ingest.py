"""``memstack bench ingest``: messages per second into a store that already holds N memories.

Each cell ingests fresh turns for user 0 of a store filled to ``existing``
memories: through the service (as ``memstack ingest`` does) or over HTTP
(``memstack serve`` in a child process, one client), one message per call or
50, with extraction off, queued (the call returns once the turns are stored
and the jobs queued) or inline (``sync``: the call returns after extraction).
For queued cells the queue is then drained and timed: extraction jobs per
second, the figure that must not fall as the store grows.

Before the first cell of each store a few extraction jobs of another user run
untimed (``_warm_worker``): a worker pays its one-time loads (the rules
extractor's lemma table, its compiled patterns: ~0.45 s of CPU at load 12) on
its first job, and they landed in whichever queued cell ran first, the smallest
store's batch-1 cell, adding ~1.5 ms to each of its 300 jobs (a fifth of its
figure: the 100k/1k ratio read 1.38-1.54x at batch 1 against 1.59-1.87x at
batch 50 partly for that reason).
A cell stays at ``messages`` jobs rather than growing to steady the figure:
each queued cell adds its turns and extracted memories to the store, so larger
cells would measure the smallest store several times over its stated size.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from http.client import HTTPConnection
from itertools import count
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.bench.fixture import TENANT, BenchStore, user_name
from memstack.bench.server_process import ServerProcess, post
from memstack.bench.stats import machine
from memstack.domain.retrieval.types import SearchRequest
from memstack.models import Message

INFER = ("off", "queued", "inline")
BATCHES = (1, 50)
PATHS = ("service", "http")


@dataclass
class IngestCell:
    existing: int
    path: str  # service | http
    batch: int
    infer: str
    messages: int
    seconds: float
    msg_per_s: float
    #: queued cells: how fast the worker then ran the extraction jobs
    extraction_jobs_per_s: float | None = None
    #: queued service cells: this process's CPU per extraction job (the worker runs here),
    #: which the load of a shared machine moves far less than jobs per second
    extraction_cpu_ms_per_job: float | None = None
    #: the cell's adds were one session's (each links to the session's last turns)
    session: bool = False


@dataclass
class IngestReport:
    cells: list[IngestCell]
    config: dict[str, Any]
    machine: dict[str, Any] = field(default_factory=machine)

    def as_dict(self) -> dict[str, Any]:
        return {"cells": [asdict(c) for c in self.cells], "config": self.config, "machine": self.machine}


#: turns the untimed warm-up extracts (the one-time loads all fall within the first few)
_WARM_TURNS = 20


def _warm_worker(bench: BenchStore) -> None:
    """Run a few queued extraction jobs of another user, untimed: the worker's one-time loads."""
    service = bench.service
    if service.queue is None:
        return
    turns = list(bench.corpus.messages(_WARM_TURNS, offset=90_000_000, prefix="warm-"))
    service.add(TENANT, user_name(1), turns, infer=True)
    service.queue.drain()


def _wait_drained(queue: SqliteJobQueue, deadline_s: float = 1800) -> float:
    """Seconds until another process's worker has emptied the queue."""
    started = time.perf_counter()
    end = time.monotonic() + deadline_s
    while queue.pending() and time.monotonic() < end:
        time.sleep(0.05)
    return time.perf_counter() - started


class _Cells:
    def __init__(self, bench: BenchStore, existing: int) -> None:
        self.bench, self.existing = bench, existing
        self.serial = count()
        self.cells: list[IngestCell] = []
        #: the cell being run sends its adds in one session of its own, as an agent's turns are:
        #: each add then reads the session's last turns and links to them (``domain/adjacent.py``)
        self.in_session = False

    def session(self) -> str | None:
        return f"bench-session-{next(self.serial)}" if self.in_session else None

    def fresh(self, n: int) -> list[Message]:
        return list(
            self.bench.corpus.messages(n, offset=50_000_000 + 100_000 * next(self.serial), prefix="ingest-")
        )

    def record(
        self,
        path: str,
        batch: int,
        infer: str,
        n: int,
        seconds: float,
        jobs_s: float | None,
        cpu_ms: float | None = None,
    ) -> None:
        self.cells.append(
            IngestCell(
                self.existing,
                path,
                batch,
                infer,
                n,
                round(seconds, 3),
                round(n / seconds, 1),
                jobs_s,
                cpu_ms,
                self.in_session,
            )
        )

    def through_service(self, batch: int, infer: str, n: int) -> None:
        service = self.bench.service
        messages, session = self.fresh(n), self.session()
        started = time.perf_counter()
        for i in range(0, n, batch):
            service.add(
                TENANT,
                user_name(0),
                messages[i : i + batch],
                session_id=session,
                infer=infer != "off",
                sync=infer == "inline",
            )
        seconds = time.perf_counter() - started
        jobs_s = cpu_ms = None
        if infer == "queued" and service.queue is not None:
            # No worker runs in this process: every one of the n jobs is still queued.
            began, cpu = time.perf_counter(), time.process_time()
            service.queue.drain()
            cpu_ms = round(1000 * (time.process_time() - cpu) / n, 2)
            jobs_s = round(n / (time.perf_counter() - began), 1)
        self.record("service", batch, infer, n, seconds, jobs_s, cpu_ms)

    def over_http(self, port: int, queue: SqliteJobQueue, batch: int, infer: str, n: int) -> None:
        conn = HTTPConnection("127.0.0.1", port, timeout=600)
        messages, session = self.fresh(n), self.session()
        started = time.perf_counter()
        for i in range(0, n, batch):
            body = {
                "user_id": user_name(0),
                **({"session_id": session} if session else {}),
                "infer": infer != "off",
                "sync": infer == "inline",
                "messages": [m.model_dump(mode="json", exclude_none=True) for m in messages[i : i + batch]],
            }
            status = post(conn, "/v1/memories", body)
            if status not in (200, 201, 202):
                raise RuntimeError(f"POST /v1/memories answered {status}")
        seconds = time.perf_counter() - started
        jobs_s = None
        if infer == "queued":
            # The server's worker runs the jobs while the turns arrive: jobs over the whole time.
            total = seconds + _wait_drained(queue)
            jobs_s = round(n / total, 1)
        conn.close()
        self.record("http", batch, infer, n, seconds, jobs_s)


def run_ingest_bench(
    existing: Sequence[int] = (1_000, 100_000),
    *,
    messages: int = 300,
    inline_messages: int = 60,
    embedder: str = "hashing",
    paths: Sequence[str] = PATHS,
    sessions: bool = False,
    progress: Any = lambda _: None,
) -> IngestReport:
    cells: list[IngestCell] = []
    for size in sorted(existing):
        with BenchStore(embedder) as bench:
            progress(f"filling the store to {size:,} memories")
            bench.grow(0, size)
            # Load the user's index once, as a running server has it.
            bench.service.search(
                SearchRequest(tenant=TENANT, user_id=user_name(0), query="what did we talk about")
            )
            _warm_worker(bench)
            run = _Cells(bench, size)
            # with ``sessions``: each cell without a session, then the same in one (the floor first)
            modes = (False, True) if sessions else (False,)
            for batch in BATCHES if "service" in paths else ():
                for infer in INFER:
                    n = inline_messages if infer == "inline" else messages
                    for run.in_session in modes:
                        where = ", in a session" if run.in_session else ""
                        progress(f"{size:,}: service, batch {batch}, infer {infer} ({n} messages{where})")
                        run.through_service(batch, infer, n)
            if "http" in paths:
                queue = SqliteJobQueue(Database(bench.settings.db_path))
                with ServerProcess(bench.data_dir, embedder=embedder, tenant=TENANT) as server:
                    for batch in BATCHES:
                        for infer in INFER:
                            n = inline_messages if infer == "inline" else messages
                            for run.in_session in modes:
                                progress(f"{size:,}: http, batch {batch}, infer {infer} ({n} messages)")
                                run.over_http(server.port, queue, batch, infer, n)
                queue.db.close()
            cells += run.cells
    return IngestReport(
        cells,
        config={
            "existing": sorted(existing),
            "messages": messages,
            "inline_messages": inline_messages,
            "paths": list(paths),
            "sessions": sessions,
        },
    )
