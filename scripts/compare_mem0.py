#!/usr/bin/env python3
"""memstack's embedded search beside Mem0 OSS + FAISS, same rows, same vectors, same run.

Mem0 runs in a throwaway venv (``scripts/mem0_peer.py`` says how to make it), as a child
process fed one command per line; memstack runs here. For each size the same user's turns
(the benchmark's synthetic conversation, ``memstack bench search``'s fill) are stored on both
sides: memstack through ``service.add`` (infer off), Mem0 as one memory per turn with the
payload ``Memory.add(infer=False)`` writes, with the very vectors memstack stored (read back
from its store). Then each query is searched on both sides in turn (who goes first
alternates), each side timing its own call in its own process:

- memstack: ``service.search`` (all eight stages: query analysis, exact or two-stage vector
  search, BM25, fusion, temporal, dedup, history; no reranker configured), top 10;
- Mem0: ``Memory.search(query, top_k=10, filters={"user_id": ...})`` (FAISS flat inner
  product over every vector, its user filter, scoring and formatting; with FAISS it has no
  keyword search, and without spaCy no lemmas or entities), and the bare ``faiss`` top 10 of
  the same vector (Mem0's floor);
- memstack's floor: numpy top 200 over the vectors stage 2 ranks plus one FTS5 top 200.

Each side reports wall-clock milliseconds and its process's CPU milliseconds (``*_cpu``,
``time.process_time``: every thread of the process). On a loaded machine the CPU figures are
the ones to compare: a longer search is preempted more often, so wall time inflates it more.

The query's embedding is excluded on both sides: each query's vector is computed before any
search and handed over (Mem0: its embedder answers it; memstack: the retriever's embedder
looks it up). Both sides use one thread (memstack's BLAS; FAISS's OpenMP).

Run (the vectors are cached, so a second run does not embed again):

    nice -n 15 .venv/bin/python scripts/compare_mem0.py --mem0-python /tmp/mem0-venv/bin/python \\
        --sizes 1000,10000 --embedder minilm --embedding-cache /tmp/memstack-vectors
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from memstack.bench.fixture import TENANT, BenchStore, user_name
from memstack.bench.floor import Floor, live_rows
from memstack.bench.stats import machine, percentiles
from memstack.domain.retrieval.types import SearchRequest
from memstack.ports.embedder import Embedder

PEER = Path(__file__).with_name("mem0_peer.py")


class GivenQueries:
    """The retriever's embedder with every query's vector computed beforehand: a dict lookup."""

    def __init__(self, inner: Embedder, queries: list[str]) -> None:
        self.inner, self.dim, self.name = inner, inner.dim, inner.name
        self.vectors = dict(zip(queries, inner.embed(queries), strict=True))

    def embed(self, texts: list[str]) -> np.ndarray:
        if all(t in self.vectors for t in texts):
            return np.vstack([self.vectors[t] for t in texts])
        return self.inner.embed(texts)


class Peer:
    """The Mem0 child process."""

    def __init__(self, python: str, dims: int) -> None:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MEM0_TELEMETRY": "False"}
        self.proc = subprocess.Popen(
            [python, str(PEER), str(dims)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
        self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the Mem0 peer exited ({self.proc.wait()})")
        out: dict[str, Any] = json.loads(line)
        return out

    def ask(self, **cmd: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _rows(bench: BenchStore, sent: set[str], out: Path) -> int:
    """The user's rows not yet sent to Mem0, with the vectors memstack stored, into ``out``."""
    records, vectors = live_rows(bench.service.store, TENANT, user_name(0))
    kept = [r for r in records if r.id not in sent]
    np.savez(
        out,
        ids=np.array([r.id for r in kept]),
        texts=np.array([r.content for r in kept]),
        created=np.array([r.created_at.isoformat() for r in kept]),
        vectors=np.vstack([vectors[r.id] for r in kept]).astype(np.float32),
    )
    sent.update(r.id for r in kept)
    return len(kept)


def run(args: argparse.Namespace) -> dict[str, Any]:
    # As ``memstack bench search``: no log line per search (Mem0 logs nothing at INFO either).
    logging.getLogger("memstack").setLevel(logging.WARNING)
    queries = BenchStore.queries(args.queries)
    cache = Path(args.embedding_cache) if args.embedding_cache else None
    with BenchStore(args.embedder, embedding_cache=cache) as bench, tempfile.TemporaryDirectory() as tmp:
        retriever = bench.service.retriever
        given = GivenQueries(retriever.embedder, queries)
        retriever.embedder = given
        peer = Peer(args.mem0_python, given.dim)
        sent: set[str] = set()
        points = []
        try:
            for n in sorted(args.sizes):
                print(f"filling to {n:,} memories", file=sys.stderr, flush=True)
                bench.grow(0, n)
                path = Path(tmp) / f"rows-{n}.npz"
                _rows(bench, sent, path)
                rows = peer.ask(op="load", file=str(path))["rows"]
                exact = n < bench.settings.retrieval.exact_vector_below
                floor = Floor.of_user(bench.settings.db_path, TENANT, user_name(0), exact=exact)
                times: dict[str, list[float]] = {
                    "memstack": [],
                    "memstack_floor": [],
                    "mem0": [],
                    "faiss": [],
                    "memstack_cpu": [],
                    "mem0_cpu": [],
                    "faiss_cpu": [],
                }
                # one untimed search each: memstack loads the user's index, Mem0 warms up
                bench.service.search(SearchRequest(tenant=TENANT, user_id=user_name(0), query=queries[0]))
                peer.ask(op="search", query=queries[0], vector=given.vectors[queries[0]].tolist())
                for i, query in enumerate(queries):
                    vector = given.vectors[query]
                    times["memstack_floor"].append(floor.search(vector, query))
                    for side in (0, 1) if i % 2 == 0 else (1, 0):
                        if side == 0:
                            started, cpu = time.perf_counter(), time.process_time()
                            bench.service.search(
                                SearchRequest(tenant=TENANT, user_id=user_name(0), query=query)
                            )
                            times["memstack"].append((time.perf_counter() - started) * 1000)
                            times["memstack_cpu"].append((time.process_time() - cpu) * 1000)
                        else:
                            got = peer.ask(op="search", query=query, vector=vector.tolist())
                            for name in ("mem0", "faiss"):
                                times[name].append(got[f"{name}_ms"])
                                times[f"{name}_cpu"].append(got[f"{name}_cpu_ms"])
                floor.close()
                p50 = {k: percentiles(v) for k, v in times.items()}
                points.append(
                    {
                        "memories": n,
                        "mem0_rows": rows,
                        "memstack_vector_stage": "exact" if exact else "two-stage",
                        "ms": p50,
                        "memstack_over_mem0_p50": round(p50["memstack"]["p50"] / p50["mem0"]["p50"], 2),
                        "memstack_over_mem0_cpu_p50": round(
                            p50["memstack_cpu"]["p50"] / p50["mem0_cpu"]["p50"], 2
                        ),
                    }
                )
                print(json.dumps(points[-1]), file=sys.stderr, flush=True)
        finally:
            peer.close()
    return {"points": points, "embedder": args.embedder, "queries": args.queries, "machine": machine()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mem0-python", required=True, help="python of a venv with mem0ai and faiss-cpu")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", default="minilm", help="hashing | minilm | mpnet (the rows' vectors)")
    parser.add_argument("--embedding-cache", help="keep the vectors here and reuse them next run")
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
