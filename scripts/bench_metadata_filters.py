"""What a metadata or agent filter costs a search, beside the same search without one.

    .venv/bin/python scripts/bench_metadata_filters.py --memories 10000 --queries 200

One user of an embedded store (a throwaway data directory) holds N memories
with the metadata an agent application writes: ``agent_id`` (4 agents), a
``topic`` (10 values) and, on 1 in 100, ``flag: true``. Each query runs the
whole retrieval pipeline (``MemoryService.search``, as the API runs it)
once without a filter and once under each filter, in turn, so load drift on
a shared machine weighs on all alike. Reported: medians and p95 in ms, and
each filter's median over the unfiltered median of the same run (the floor).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.factory import build_service
from memstack.models import MemoryFilters, MemoryRecord
from memstack.service import MemoryService
from memstack.settings import load_settings

#: the vocabulary of memories and queries (one line of words reads better than a column)
WORDS = (  # noqa: SIM905
    "coffee tea ramen sushi garden piano guitar hiking cycling lisbon osaka porto train flight "
    "doctor dentist allergy peanuts dog cat puppy birthday wedding museum novel movie jazz "
    "nurse teacher office meeting project deadline vacation beach mountain winter summer"
).split()
CASES: dict[str, MemoryFilters] = {
    "no filter": MemoryFilters(),
    "agent_id (1 in 4)": MemoryFilters(metadata={"agent_id": ("agent-1",)}),
    "topic in 2 of 10": MemoryFilters(metadata={"topic": ("topic-3", "topic-7")}),
    "agent and topic (1 in 20)": MemoryFilters(metadata={"agent_id": ("agent-2",), "topic": ("topic-4",)}),
    "flag (1 in 100)": MemoryFilters(metadata={"flag": (True,)}),
}


def fill(service: MemoryService, n: int, rng: np.random.Generator) -> None:
    coarse_dim = service.settings.embedding.coarse_dim
    for start in range(0, n, 1000):
        texts = [" ".join(rng.choice(WORDS, size=6)) for _ in range(min(1000, n - start))]
        vectors = service.embedder.embed(texts)
        records = []
        for j, (text, vec) in enumerate(zip(texts, vectors, strict=True)):
            i = start + j
            metadata: dict[str, object] = {"agent_id": f"agent-{i % 4}", "topic": f"topic-{i % 10}"}
            if i % 100 == 0:
                metadata["flag"] = True
            records.append(
                MemoryRecord(
                    tenant="bench",
                    user_id="u",
                    content=text,
                    metadata=metadata,
                    embedding_full=vec.tolist(),
                    embedding_coarse=coarse_prefix(vec, coarse_dim).tolist(),
                )
            )
        service.store.put(records)


def measure(service: MemoryService, queries: list[str]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in CASES}
    # A filtered search returns top_k results whenever top_k memories pass the filter.
    passing = {name: len(service.list("bench", "u", f, 10)[0]) for name, f in CASES.items()}
    for query in queries:
        for name, filters in CASES.items():
            request = SearchRequest(tenant="bench", user_id="u", query=query, filters=filters)
            started = time.perf_counter()
            result = service.search(request)
            times[name].append((time.perf_counter() - started) * 1000)
            if len(result.hits) < min(request.top_k, passing[name]):
                raise SystemExit(f"{name}: {len(result.hits)} hits for {query!r}, fewer than top_k")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    logging.getLogger("memstack").setLevel(logging.WARNING)
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp), embedder="hashing")
        service = build_service(settings)
        try:
            fill(service, args.memories, rng)
            queries = [" ".join(rng.choice(WORDS, size=2)) for _ in range(args.queries)]
            measure(service, queries[:5])  # load the user's index before timing
            times = measure(service, queries)
        finally:
            service.close()
    floor = statistics.median(times["no filter"])
    print(f"{args.memories:,} memories, {args.queries} queries, load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':<28}{'p50 ms':>9}{'p95 ms':>9}{'p50 / no filter':>17}")
    for name, ms in times.items():
        p95 = float(np.percentile(ms, 95))
        print(f"{name:<28}{statistics.median(ms):>9.2f}{p95:>9.2f}{statistics.median(ms) / floor:>17.2f}")


if __name__ == "__main__":
    main()
