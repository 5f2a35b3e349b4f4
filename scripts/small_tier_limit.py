#!/usr/bin/env python3
"""The small tier (``dynamodb`` store) at 500 / 2,000 / 20,000 memories per user: after a write, and cold.

Runs the real ``DynamoDBMemoryStore`` (with its S3 snapshot objects) and the
real retrieval pipeline on ``memstack.bench.aws_model``, an in-process model
of the DynamoDB and S3 calls (moto holding 2,000 memories of 1,024-d vectors
did not finish in 20 minutes). boto3 builds, signs and parses every request as
against AWS; only the services' work is the model's, and
``tests/bench/test_aws_model.py`` checks the model answers every call of the
store as moto does. Per size, each a median / p95 of ``--searches``:

- ``after write``: one memory written (an agent's turn), then a search by a
  warm container (META, the write log since its snapshot, the changed items);
- ``warm``: nothing written since the last search;
- ``cold``: a new container's first search: META, the stored snapshot from S3
  (parallel ranged GETs), the log written since it (``--behind`` writes; the
  workers store a new snapshot every ``--compact`` writes), the items it names;
- ``cold, no snapshot``: a new container's first search reading the whole
  partition (what every cold search did before, and what it does when no
  snapshot is stored yet).

In-function time is wall time minus the model's own time answering (so it
includes botocore's request building and response parsing, the snapshot load
and the whole pipeline; query embedding by the in-process hashing embedder:
the deployed function's Bedrock embedding call is not included). The AWS time
is added from a stated model, not measured: DynamoDB ``--request-ms`` per
request + ``--mb-ms`` per MB returned; S3 ``--s3-first-byte-ms`` per GET plus
its bytes at ``--s3-mb-s`` per connection, ``--s3-connections`` GETs at once,
all GETs together at most ``--s3-cap-mb-s``. Read units are DynamoDB's
(strongly consistent, whole items, 4 KB). The floor, in the same run, is
numpy's exact top-200 over the user's vectors alone (all of them below 200).

Run: ``nice -n 10 .venv/bin/python scripts/small_tier_limit.py --sizes 500,2000,20000``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import sys
import threading
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import numpy as np
from botocore.config import Config
from memstack.adapters.blas import limit_blas_threads
from memstack.adapters.dynamodb.snapshot_objects import CONNECTIONS, PART_BYTES, SnapshotObjects
from memstack.adapters.dynamodb.store import COMPACT_WRITES, DynamoDBMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.bench.aws_model import AwsModel, Call
from memstack.bench.corpus import Corpus
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryRecord, Tier
from memstack.settings import load_settings

TABLE, BUCKET, REGION = "memstack-memories", "memstack-snapshots", "us-east-1"
#: on-demand list prices, us-east-1 (docs/deploy.md's cost tables use the same)
RRU_USD, WRU_USD = 0.125e-6, 0.625e-6
S3_GET_USD, S3_PUT_USD, S3_GB_MONTH_USD = 0.0004e-3, 0.005e-3, 0.023


def _record(rng: random.Random, corpus: Corpus, i: int, dim: int, t0: datetime) -> MemoryRecord:
    vec = np.random.default_rng(i).standard_normal(dim).astype(np.float32)
    vec /= np.linalg.norm(vec)
    return MemoryRecord(
        tenant="acme",
        user_id="maya",
        content=corpus.sentence(rng),
        tier=Tier.LTM if i % 4 == 0 else Tier.STM,
        created_at=t0 + timedelta(minutes=i),
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, dim).tolist(),
        source_ids=[f"msg-{i}"],
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


class Meter:
    """The calls one search made (from the model's record) and what they cost in time and money."""

    def __init__(self, model: AwsModel, args: argparse.Namespace) -> None:
        self.model, self.args = model, args
        self.start = 0

    def begin(self) -> None:
        self.start = len(self.model.calls)

    def calls(self) -> list[Call]:
        return self.model.calls[self.start :]

    def figures(self, wall: float) -> dict[str, float]:
        calls, a = self.calls(), self.args
        main = threading.main_thread().name
        # The model's time on this thread is the service's, not the function's. Ranged GETs run on
        # the loader's threads: their model time is left in (the function's time is over-stated).
        own = wall - sum(c.model_s for c in calls if c.thread == main)
        ddb = [c for c in calls if c.service == "dynamodb"]
        gets = [c for c in calls if c.service == "s3" and c.operation == "GetObject"]
        # DynamoDB calls made while the snapshot downloads (between ``start_load`` and the wait for
        # it: ``_traced_loads``) overlap the transfer: only what outlasts it adds.
        serial_s = hidden_s = 0.0
        loading = False
        for c in calls:
            if c.service == "mark":
                loading = c.operation == "load-started"
            elif c.service == "dynamodb":
                seconds = a.request_ms / 1000 + c.bytes_out / 1e6 * a.mb_ms / 1000
                if loading and c.thread == main:
                    hidden_s += seconds
                else:
                    serial_s += seconds
        s3_s = 0.0
        if gets:
            total = sum(c.bytes_out for c in gets)
            waves = math.ceil(len(gets) / a.s3_connections)
            part = max(c.bytes_out for c in gets)
            per_wave = a.s3_first_byte_ms / 1000 + part / 1e6 / a.s3_mb_s
            s3_s = max(waves * per_wave, a.s3_first_byte_ms / 1000 + total / 1e6 / a.s3_cap_mb_s)
        rru = sum(c.rru for c in ddb)
        return {
            "ms": own * 1000,
            "aws_ms": (serial_s + max(s3_s, hidden_s)) * 1000,
            "requests": len(ddb),
            "rru": rru,
            "ddb_mb": sum(c.bytes_out for c in ddb) / 1e6,
            "s3_gets": len(gets),
            "s3_mb": sum(c.bytes_out for c in gets) / 1e6,
            "usd": rru * RRU_USD + len(gets) * S3_GET_USD,
        }


#: the model the current measurement runs on (``_traced_loads`` marks its record)
_CURRENT: dict[str, AwsModel] = {}


def _traced_loads() -> None:
    """Mark in the model's record when a snapshot download starts and when the store waits it out."""
    start_load = SnapshotObjects.start_load

    def traced(self: SnapshotObjects, key: str, size: int, *, spare: int = 0) -> Any:
        _CURRENT["model"].mark("load-started")
        finish = start_load(self, key, size, spare=spare)

        def wait() -> Any:
            try:
                return finish()
            finally:
                _CURRENT["model"].mark("load-finished")

        return wait

    SnapshotObjects.start_load = traced  # type: ignore[method-assign]


def _summary(runs: list[dict[str, float]]) -> dict[str, float]:
    ms = [r["ms"] for r in runs]
    total = [r["ms"] + r["aws_ms"] for r in runs]
    out = {"p50 ms": statistics.median(ms), "p95 ms": _pct(ms, 0.95)}
    out |= {"+ AWS p50 ms": statistics.median(total), "+ AWS p95 ms": _pct(total, 0.95)}
    for name in ("aws_ms", "requests", "rru", "ddb_mb", "s3_gets", "s3_mb", "usd"):
        out[name] = statistics.median(r[name] for r in runs)
    out["runs"] = len(runs)
    return out


def measure(n: int, args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings(embedding_dim=args.dim, coarse_dim=args.dim, embedder="hashing")
    limit_blas_threads(settings.embedding.blas_threads)  # as the function does (factory.build_service)
    embedder = HashingEmbedder(args.dim)
    corpus, rng = Corpus(), random.Random(n)
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    queries = corpus.queries(args.searches)
    model = _CURRENT["model"] = AwsModel()
    model.create_table(TABLE)
    model.create_bucket(BUCKET)
    keys = {"aws_access_key_id": "model", "aws_secret_access_key": "model"}
    ddb = model.install(boto3.client("dynamodb", region_name=REGION, **keys))
    s3_config = Config(
        s3={"addressing_style": "path"},
        max_pool_connections=args.s3_connections,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    s3 = model.install(boto3.client("s3", region_name=REGION, config=s3_config, **keys))

    def store(compact_writes: int = args.compact) -> DynamoDBMemoryStore:
        objects = SnapshotObjects(BUCKET, s3, connections=args.s3_connections)
        return DynamoDBMemoryStore(TABLE, ddb, snapshots=objects, compact_writes=compact_writes)

    serial = 0

    def fresh(count: int) -> list[MemoryRecord]:
        nonlocal serial
        batch = [_record(rng, corpus, serial + j, args.dim, t0) for j in range(count)]
        serial += count
        return batch

    writer = store()
    started = time.perf_counter()
    while serial < n:
        writer.put(fresh(min(500, n - serial)))
    out: dict[str, Any] = {"memories": n, "load s": time.perf_counter() - started}
    # The model's items are millions of small objects a function's process never holds: kept out of
    # the garbage collector's passes, which would otherwise stall searches for seconds at 20,000.
    gc.collect()
    gc.freeze()
    meter = Meter(model, args)
    # A container builds its retriever once (the category prototypes are embedded then).
    retriever = Retriever(store(), embedder, settings.retrieval)

    def timed(s: DynamoDBMemoryStore, query: str) -> dict[str, float]:
        retriever.store = s
        meter.begin()
        began = time.perf_counter()
        retriever.search(SearchRequest(tenant="acme", user_id="maya", query=query, top_k=10))
        return meter.figures(time.perf_counter() - began)

    # Before any snapshot is stored: the cold search reads the whole partition.
    first = store(compact_writes=1)
    out["cold, no snapshot"] = _summary([timed(first, queries[0])])
    meter.begin()
    assert first.compact_user("acme", "maya"), "the first snapshot was not stored"
    stored = [c for c in meter.calls() if c.operation == "PutObject"]
    out["snapshot MB"] = stored[0].bytes_in / 1e6 if stored else 0.0
    for _ in range(args.behind):  # the writes since that snapshot, one memory each
        writer.put(fresh(1))
    gc.collect()
    gc.freeze()
    out["cold"] = _summary([timed(store(), queries[i % len(queries)]) for i in range(args.cold)])
    # The memory a cold search allocates (the snapshot held, and what loading it needed at its peak),
    # in a run of its own: tracing slows everything.
    tracemalloc.start()
    timed(store(), queries[0])
    out["cold peak MB"] = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    warm_store = store()
    timed(warm_store, queries[0])
    out["warm"] = _summary([timed(warm_store, q) for q in queries])
    after = []
    meter_writes = []
    for q in queries:
        meter.begin()
        writer.put(fresh(1))
        meter_writes.append(sum(c.wru for c in meter.calls()))
        after.append(timed(warm_store, q))
    out["after write"] = _summary(after)
    out["WRU per write"] = statistics.median(meter_writes)
    matrix = np.vstack([_record(rng, corpus, i, args.dim, t0).embedding_full for i in range(n)]).astype(
        np.float32
    )
    floor = []
    top = min(200, n)  # below 200 memories the floor ranks them all
    for q in queries:
        v = embedder.embed([q])[0]
        began = time.perf_counter()
        np.argpartition(-(matrix @ v), top - 1)[:top]
        floor.append(time.perf_counter() - began)
    out["floor p50 ms"] = statistics.median(floor) * 1000
    gc.unfreeze()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="500,2000,20000")
    ap.add_argument("--dim", type=int, default=1024, help="embedding_dim (Titan V2 on the small tier)")
    ap.add_argument("--searches", type=int, default=40, help="searches per figure (warm, after write)")
    ap.add_argument("--cold", type=int, default=3, help="cold-container first searches per size")
    ap.add_argument("--compact", type=int, default=COMPACT_WRITES, help="writes between stored snapshots")
    ap.add_argument("--behind", type=int, default=COMPACT_WRITES - 1, help="writes since the stored snapshot")
    ap.add_argument("--request-ms", type=float, default=5.0, help="modelled DynamoDB time per request")
    ap.add_argument("--mb-ms", type=float, default=25.0, help="modelled DynamoDB time per MB returned")
    ap.add_argument("--s3-first-byte-ms", type=float, default=30.0, help="modelled S3 time to first byte")
    ap.add_argument("--s3-mb-s", type=float, default=80.0, help="modelled S3 MB/s per connection")
    ap.add_argument("--s3-connections", type=int, default=CONNECTIONS, help="parallel ranged GETs")
    ap.add_argument("--s3-cap-mb-s", type=float, default=300.0, help="modelled MB/s of all GETs together")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    _traced_loads()
    load_before = os.getloadavg()[0]
    results = [measure(int(s), args) for s in args.sizes.split(",")]
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} CPUs"
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    a = args
    ddb_model = f"DynamoDB {a.request_ms:g} ms/request + {a.mb_ms:g} ms/MB"
    s3_model = (
        f"S3 {a.s3_first_byte_ms:g} ms to first byte + {a.s3_mb_s:g} MB/s per connection, "
        f"{a.s3_connections} ranges of {PART_BYTES // 2**20} MiB at once, {a.s3_cap_mb_s:g} MB/s together"
    )
    print(f"model: {ddb_model}; {s3_model}; dim {a.dim}; cold = {a.behind} writes after the snapshot; {load}")
    print(
        "| memories | search | in-function p50 / p95 ms | + modelled AWS p50 / p95 ms | DynamoDB requests "
        "| RRU | S3 GETs (MB) | USD per search |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        for name in ("after write", "warm", "cold", "cold, no snapshot"):
            f = r[name]
            cells = [
                f"{r['memories']:,}",
                name,
                f"{f['p50 ms']:,.0f} / {f['p95 ms']:,.0f}",
                f"{f['+ AWS p50 ms']:,.0f} / {f['+ AWS p95 ms']:,.0f}",
                f"{f['requests']:.0f}",
                f"{f['rru']:,.0f}",
                f"{f['s3_gets']:.0f} ({f['s3_mb']:.1f})",
                f"{f['usd']:.7f}",
            ]
            print(f"| {' | '.join(cells)} |")
    print()
    print(
        "| memories | snapshot MB | S3 storage USD/month | cold load peak MB (tracemalloc) | WRU per write "
        "| USD per write | floor p50 ms | after write / warm p50 | cold / warm p50 |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        cells = [
            f"{r['memories']:,}",
            f"{r['snapshot MB']:.1f}",
            f"{r['snapshot MB'] / 1000 * S3_GB_MONTH_USD:.4f}",
            f"{r['cold peak MB']:.0f}",
            f"{r['WRU per write']:.0f}",
            f"{r['WRU per write'] * WRU_USD:.7f}",
            f"{r['floor p50 ms']:.2f}",
            f"{r['after write']['p50 ms'] / r['warm']['p50 ms']:.2f}",
            f"{r['cold']['p50 ms'] / r['warm']['p50 ms']:.1f}",
        ]
        print(f"| {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
