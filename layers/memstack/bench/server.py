"""``memstack bench server``: searches per second through ``memstack serve`` as clients are added.

The store is filled in this process, then ``memstack serve`` is started on
it in a child process (loopback only) and C closed-loop clients search it
for a fixed time each: requests per second, p50/p95 latency, errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from memstack.bench.fixture import TENANT, BenchStore, user_name
from memstack.bench.http_load import run_load
from memstack.bench.server_process import ServerProcess
from memstack.bench.stats import machine, percentiles

SEARCH_PATH = "/v1/memories/search"


@dataclass
class ServerPoint:
    clients: int
    seconds: float
    requests: int
    requests_per_s: float
    latency_ms: dict[str, float]
    errors: int
    error_samples: list[str]


@dataclass
class ServerReport:
    memories: int
    server_threads: int
    server_workers: int
    points: list[ServerPoint]
    machine: dict[str, Any] = field(default_factory=machine)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "points": [asdict(p) for p in self.points]}


def run_server_bench(
    *,
    memories: int = 10_000,
    clients: Sequence[int] = (1, 8, 32),
    seconds: float = 30.0,
    threads: int = 8,
    workers: int = 1,
    embedder: str = "hashing",
    progress: Any = lambda _: None,
) -> ServerReport:
    questions = BenchStore.queries(500)

    def body(client: int, n: int) -> dict[str, Any]:
        return {
            "user_id": user_name(0),
            "query": questions[(client * 7919 + n) % len(questions)],
            "top_k": 10,
        }

    points = []
    with BenchStore(embedder) as bench:
        progress(f"filling the store to {memories:,} memories")
        bench.grow(0, memories)
        bench.service.close()  # the server process owns the file from here on
        with ServerProcess(
            bench.data_dir, embedder=embedder, threads=threads, workers=workers, tenant=TENANT
        ) as server:
            # Every worker process loads the user's index on its first search.
            run_load(server.port, SEARCH_PATH, body, clients=2 * workers, seconds=min(3.0, seconds))
            for c in sorted(clients):
                progress(f"{c} client(s) for {seconds:g} s")
                r = run_load(server.port, SEARCH_PATH, body, clients=c, seconds=seconds)
                points.append(
                    ServerPoint(
                        clients=c,
                        seconds=r.seconds,
                        requests=r.requests,
                        requests_per_s=round(len(r.latencies_ms) / r.seconds, 1),
                        latency_ms=percentiles(r.latencies_ms),
                        errors=r.errors,
                        error_samples=r.error_samples,
                    )
                )
    return ServerReport(memories=memories, server_threads=threads, server_workers=workers, points=points)
