"""``memstack bench search``: search latency per store size, beside the floor of the same run.

For each size N the store is grown to N memories per user (the sizes are
reached in order, so one store serves them all), the first search (which
loads the user's index) is timed on its own, and then every query runs
through the service exactly as ``memstack search`` runs it, followed by the
floor on the same query. The ratio of the two medians is the figure to read.

With ``users > 1`` every user holds N memories and user 0 is searched; the
same user's N memories are then put in a store of their own and searched
again, so the cost of sharing a file with other users is one number.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from memstack.bench.fixture import TENANT, BenchStore, user_name
from memstack.bench.floor import Floor
from memstack.bench.stats import machine, median, percentiles, rss_mb
from memstack.domain.retrieve import SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.service import MemoryService

Progress = Callable[[str], None]


@dataclass
class SearchPoint:
    memories: int
    users: int
    queries: int
    latency_ms: dict[str, float]
    floor_ms: dict[str, float]
    #: median search latency over the median floor: the machine-independent figure
    ratio_p50: float
    stages_p50_ms: dict[str, float]
    first_search_ms: float
    #: median share of the user's memories a query's words match (what BM25 ranks)
    match_fraction_p50: float
    fill_msg_per_s: float
    rss_mb: float
    #: users > 1: the same user's search in a store holding only that user
    alone_latency_ms: dict[str, float] | None = None
    shared_over_alone_p50: float | None = None


@dataclass
class SearchReport:
    points: list[SearchPoint]
    config: dict[str, Any]
    machine: dict[str, Any] = field(default_factory=machine)

    def as_dict(self) -> dict[str, Any]:
        return {"points": [asdict(p) for p in self.points], "config": self.config, "machine": self.machine}


@dataclass
class _Run:
    latencies: list[float]
    floors: list[float]
    stages: dict[str, list[float]]
    first_ms: float
    matched: list[float] = field(default_factory=list)


def _time_searches(service: MemoryService, user: str, floor: Floor, queries: Sequence[str]) -> _Run:
    coarse_dim = service.settings.coarse_dim
    started = time.perf_counter()
    service.search(SearchRequest(tenant=TENANT, user_id=user, query=queries[0]))
    first = (time.perf_counter() - started) * 1000
    run = _Run([], [], {}, round(first, 3))
    for i, query in enumerate(queries):
        q_coarse = coarse_prefix(service.embedder.embed([query])[0], coarse_dim)
        # Alternate which goes first, so a burst of load weighs on both alike.
        if i % 2:
            run.floors.append(floor.search(q_coarse, query))
        started = time.perf_counter()
        result = service.search(SearchRequest(tenant=TENANT, user_id=user, query=query))
        run.latencies.append((time.perf_counter() - started) * 1000)
        if not i % 2:
            run.floors.append(floor.search(q_coarse, query))
        for stage, ms in result.stage_durations.items():
            run.stages.setdefault(stage, []).append(ms)
    run.matched = [floor.match_fraction(q) for q in queries]
    return run


def _measure(bench: BenchStore, queries: Sequence[str]) -> _Run:
    floor = Floor.of_user(bench.settings.db_path, TENANT, user_name(0))
    try:
        return _time_searches(bench.service, user_name(0), floor, queries)
    finally:
        floor.close()


def run_search_bench(
    sizes: Sequence[int],
    *,
    users: int = 1,
    embedder: str = "hashing",
    queries: int = 200,
    progress: Progress = lambda _: None,
) -> SearchReport:
    texts = BenchStore.queries(queries)
    points: list[SearchPoint] = []
    with BenchStore(embedder) as shared:
        for n in sorted(sizes):
            progress(f"filling {users} user(s) to {n:,} memories")
            before = sum(shared.sizes.values())
            seconds = sum(shared.grow(u, n) for u in range(users))
            added = sum(shared.sizes.values()) - before
            progress(f"searching {n:,} memories ({queries} queries)")
            run = _measure(shared, texts)
            point = SearchPoint(
                memories=n,
                users=users,
                queries=queries,
                latency_ms=percentiles(run.latencies),
                floor_ms=percentiles(run.floors),
                ratio_p50=round(median(run.latencies) / median(run.floors), 2),
                stages_p50_ms={stage: median(ms) for stage, ms in run.stages.items()},
                first_search_ms=run.first_ms,
                match_fraction_p50=round(median(run.matched), 4),
                fill_msg_per_s=round(added / seconds, 1) if seconds else float("nan"),
                rss_mb=rss_mb(),
            )
            if users > 1:
                progress(f"searching the same user alone in a store ({n:,} memories)")
                with BenchStore(embedder) as alone:
                    alone.grow(0, n)
                    solo = _measure(alone, texts)
                point.alone_latency_ms = percentiles(solo.latencies)
                point.shared_over_alone_p50 = round(median(run.latencies) / median(solo.latencies), 2)
            points.append(point)
    return SearchReport(
        points,
        config={
            "sizes": sorted(sizes),
            "users": users,
            "embedder": embedder,
            "queries": queries,
            "top_k": 10,
        },
    )
