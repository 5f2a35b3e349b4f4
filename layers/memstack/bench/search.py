"""``memstack bench search``: search latency per store size, beside the floor of the same run.

For each size N the store is grown to N memories per user (the sizes are
reached in order, so one store serves them all), the first search (which
loads the user's index) is timed on its own, and then every query runs
through the service exactly as ``memstack search`` runs it, next to the
floor on the same query. The ratio of the two medians is the figure to read.
A store on a database server (postgres) is also timed beside its own two
statements' minimal forms on that server (``server_floor.py``).

With ``users > 1`` every user holds N memories and user 0 is searched; the
same user's N memories are also kept in a store of their own, searched query
by query in turn with the shared one, so the cost of sharing a file with
other users is one number that load drift does not tilt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstack.bench.fixture import TENANT, BenchStore, user_name
from memstack.bench.floor import Floor
from memstack.bench.recall import vector_recall
from memstack.bench.stats import machine, median, percentiles, rss_mb
from memstack.domain.retrieval.types import SearchRequest
from memstack.service import MemoryService
from memstack.settings import load_settings

if TYPE_CHECKING:
    from memstack.bench.server_floor import ServerFloor

Progress = Callable[[str], None]
#: queries whose vector-stage recall is measured (a full scan each, outside the timings)
_RECALL_QUERIES = 50


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
    #: median and mean share of the exact full-dimension top 10 the vector stage found (embedded store)
    vector_recall_at_10: float | None = None
    vector_recall_at_10_mean: float | None = None
    #: whether stage 2 ranked every full vector (the embedded store below ``exact_vector_below``)
    vector_exact: bool | None = None
    #: a store on a database server (postgres): its two statements' minimal forms on that server
    #: (``server_floor.py``), and the median search latency over their median
    server_floor_ms: dict[str, float] | None = None
    server_ratio_p50: float | None = None


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
    server_floors: list[float] = field(default_factory=list)


def _first_search_ms(service: MemoryService, user: str, query: str) -> float:
    started = time.perf_counter()
    service.search(SearchRequest(tenant=TENANT, user_id=user, query=query))
    return round((time.perf_counter() - started) * 1000, 3)


def _time_searches(
    services: Sequence[MemoryService],
    user: str,
    floor: Floor,
    queries: Sequence[str],
    server_floor: ServerFloor | None = None,
) -> list[_Run]:
    """One run per service, query by query in turn with the floors, so load drift weighs on all alike."""
    runs = [_Run([], [], {}, _first_search_ms(service, user, queries[0])) for service in services]
    for i, query in enumerate(queries):
        query_vec = services[0].embedder.embed([query])[0]
        floor_ms = floor.search(query_vec, query)
        if server_floor is not None:
            runs[0].server_floors.append(server_floor.search(query_vec, query))
        # Rotate who goes first, so no one always runs right after the floor.
        for k in range(len(services)):
            j = (i + k) % len(services)
            started = time.perf_counter()
            result = services[j].search(SearchRequest(tenant=TENANT, user_id=user, query=query))
            runs[j].latencies.append((time.perf_counter() - started) * 1000)
            runs[j].floors.append(floor_ms)
            for stage, ms in result.stage_durations.items():
                runs[j].stages.setdefault(stage, []).append(ms)
    matched = [floor.match_fraction(q) for q in queries]
    for run in runs:
        run.matched = matched
    return runs


def _floor(store: BenchStore) -> Floor:
    """The floor over what the measured store holds for user 0, whatever the backend.

    The embedded store below ``exact_vector_below`` ranks every full vector: so does its floor.
    """
    if store.settings.store_backend == "embedded":
        size = store.sizes.get(user_name(0), 0)
        exact = size < store.settings.retrieval.exact_vector_below
        return Floor.of_user(store.settings.db_path, TENANT, user_name(0), exact=exact)
    return Floor.of_store(store.service.store, TENANT, user_name(0), store.settings.embedding.coarse_dim)


def _server_floor(store: BenchStore) -> ServerFloor | None:
    """The floor on the store's own database server, for a store that has one (postgres)."""
    if store.settings.store_backend != "postgres":
        return None
    from memstack.adapters.postgres.store import PostgresMemoryStore
    from memstack.bench.server_floor import ServerFloor

    assert isinstance(store.service.store, PostgresMemoryStore)
    return ServerFloor(store.service.store, TENANT, user_name(0))


def _measure(stores: Sequence[BenchStore], queries: Sequence[str]) -> list[_Run]:
    floor = _floor(stores[0])
    try:
        return _time_searches(
            [s.service for s in stores], user_name(0), floor, queries, _server_floor(stores[0])
        )
    finally:
        floor.close()


def _settled(stores: Sequence[BenchStore]) -> None:
    """After a fill, what a store does for a bulk load (postgres: refresh the planner's statistics,
    as ``memstack import`` does and autovacuum would a minute later), so a search sees steady state."""
    for store in stores:
        analyze = getattr(store.service.store, "analyze", None)
        if callable(analyze):
            analyze()


def run_search_bench(
    sizes: Sequence[int],
    *,
    users: int = 1,
    embedder: str = "hashing",
    queries: int = 200,
    progress: Progress = lambda _: None,
    backend: str = "embedded",
    embedding_cache: Path | None = None,
) -> SearchReport:
    """``backend``: ``embedded`` (a temporary data directory) or ``postgres`` (see bench/postgres.py).

    ``embedding_cache``: the turns' and the queries' vectors are kept there (``BenchStore``); the
    queries are embedded before any search, so the timed searches then look their vector up
    instead of running the model.
    """
    with ExitStack() as stack:
        # Named outright, so a MEMSTACK_STORE_BACKEND in the shell cannot swap the store measured.
        store_settings: Callable[[], dict[str, Any]] = lambda: {"store_backend": "embedded"}  # noqa: E731
        if backend == "postgres":
            from memstack.bench.postgres import postgres_stores

            store_settings = stack.enter_context(postgres_stores(load_settings()))
        shared = stack.enter_context(
            BenchStore(embedder, embedding_cache=embedding_cache, **store_settings())
        )
        alone = stack.enter_context(BenchStore(embedder, embedding_cache=embedding_cache, **store_settings()))
        if embedding_cache is not None:
            shared.service.embedder.embed(BenchStore.queries(queries))
        return _run(
            sizes,
            shared,
            alone,
            users=users,
            embedder=embedder,
            queries=queries,
            progress=progress,
            backend=backend,
        )


def _run(
    sizes: Sequence[int],
    shared: BenchStore,
    alone: BenchStore,
    *,
    users: int,
    embedder: str,
    queries: int,
    progress: Progress,
    backend: str,
) -> SearchReport:
    texts = BenchStore.queries(queries)
    points: list[SearchPoint] = []
    for n in sorted(sizes):
        progress(f"filling {users} user(s) to {n:,} memories")
        before = sum(shared.sizes.values())
        seconds = sum(shared.grow(u, n) for u in range(users))
        added = sum(shared.sizes.values()) - before
        stores = [shared]
        if users > 1:
            progress(f"filling a store of user 0 alone to {n:,} memories")
            alone.grow(0, n)
            stores.append(alone)
        _settled(stores)
        progress(f"searching {n:,} memories ({queries} queries)")
        run, *solo = _measure(stores, texts)
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
        recall = vector_recall(shared.service, TENANT, user_name(0), texts[:_RECALL_QUERIES])
        if recall is not None:
            point.vector_recall_at_10, point.vector_recall_at_10_mean = recall
            point.vector_exact = n < shared.settings.retrieval.exact_vector_below
        if run.server_floors:
            point.server_floor_ms = percentiles(run.server_floors)
            point.server_ratio_p50 = round(median(run.latencies) / median(run.server_floors), 2)
        if solo:
            point.alone_latency_ms = percentiles(solo[0].latencies)
            point.shared_over_alone_p50 = round(median(run.latencies) / median(solo[0].latencies), 2)
        points.append(point)
    return SearchReport(
        points,
        config={
            "sizes": sorted(sizes),
            "users": users,
            "embedder": embedder,
            "queries": queries,
            "top_k": 10,
            "backend": backend,
            "exact_vector_below": shared.settings.retrieval.exact_vector_below,
        },
    )
