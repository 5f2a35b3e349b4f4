#!/usr/bin/env python3
"""Small tier (``dynamodb`` store) search at 500 / 2,000 / 20,000 memories per user: after a write, and cold.

Runs the real ``DynamoDBMemoryStore`` and the real retrieval pipeline against
moto (no AWS). Three figures per size, each a median / p95 of ``--searches``:

- ``warm``: a search with nothing written since the last one (the cached snapshot);
- ``after write``: one memory written (as an agent's turn does), then a search;
- ``cold``: a new store object (a cold container), then its first search.

What is timed is the function's own time: wall time minus the time spent inside
moto's emulated DynamoDB (which stands in for the service), so it includes
botocore's request building and response parsing. DynamoDB's own time is then
added from a stated model (``--request-ms`` per request, ``--mb-ms`` per MB
returned), not measured. Read request units are counted per search from the
items each call returned, on their full stored size (what DynamoDB bills, not
the projected bytes): strongly consistent, 4 KB per unit, a Query summed over its
items, GetItem and BatchGetItem per item. The floor, measured in the same run, is
numpy's exact top-200 over the user's coarse vectors alone.

Run: ``nice -n 10 .venv/bin/python scripts/small_tier_search.py --sizes 500,2000,20000``.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import numpy as np
from memstack.adapters.blas import limit_blas_threads
from memstack.adapters.dynamodb import items
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.bench.corpus import Corpus
from memstack.domain.retrieval import Retriever, SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryRecord, Tier
from memstack.settings import load_settings
from moto import mock_aws
from moto.core.botocore_stubber import BotocoreStubber

TABLE = "memstack-memories"
RRU_BYTES = 4096


class Meter:
    """Per search: time inside moto, requests, bytes returned and read units (on full item sizes)."""

    def __init__(self, client: Any, sizes: dict[tuple[str, str], int]) -> None:
        self.sizes = sizes
        self.server_s = 0.0
        self.reset()
        client.meta.events.register("after-call.dynamodb.*", self._after)
        original = BotocoreStubber.__call__
        meter = self

        def timed(stubber: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(stubber, event_name, request, **kwargs)
            finally:
                meter.server_s += time.perf_counter() - started

        BotocoreStubber.__call__ = timed  # type: ignore[method-assign]

    def reset(self) -> None:
        self.server_s, self.requests, self.bytes, self.rru = 0.0, 0, 0, 0.0

    def _size(self, item: dict[str, Any]) -> int:
        key = (item.get("pk", {}).get("S", ""), item.get("sk", {}).get("S", ""))
        return self.sizes.get(key, 100)  # META and LOG items: ~100 bytes

    def _after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        self.requests += 1
        if model.name == "GetItem":
            found = [parsed["Item"]] if "Item" in parsed else []
            self.rru += sum(math.ceil(self._size(i) / RRU_BYTES) for i in found) or 1
        elif model.name == "Query":
            found = parsed.get("Items", [])
            self.rru += max(1, math.ceil(sum(self._size(i) for i in found) / RRU_BYTES))
        elif model.name == "BatchGetItem":
            found = [i for rows in parsed.get("Responses", {}).values() for i in rows]
            self.rru += sum(math.ceil(self._size(i) / RRU_BYTES) for i in found)
        else:
            return
        self.bytes += sum(len(json.dumps(i, default=str)) for i in found)


def _record(rng: random.Random, corpus: Corpus, i: int, dim: int, coarse: int, t0: datetime) -> MemoryRecord:
    vec = np.random.default_rng(i).standard_normal(dim).astype(np.float32)
    vec /= np.linalg.norm(vec)
    return MemoryRecord(
        tenant="acme",
        user_id="maya",
        content=corpus.sentence(rng),
        tier=Tier.LTM if i % 4 == 0 else Tier.STM,
        created_at=t0 + timedelta(minutes=i),
        embedding_full=vec.tolist(),
        embedding_coarse=coarse_prefix(vec, coarse).tolist(),
        source_ids=[f"msg-{i}"],
    )


def _item_size(record: MemoryRecord) -> int:
    size = 0
    for name, value in items.to_item(record).items():
        ((kind, raw),) = value.items()
        size += len(name) + (len(bytes(raw)) if kind == "B" else len(json.dumps(raw, default=str)))
    return size


@contextmanager
def _table() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(n: int, args: argparse.Namespace) -> dict[str, Any]:
    settings = load_settings(embedding_dim=args.dim, coarse_dim=args.coarse, embedder="hashing")
    limit_blas_threads(settings.embedding.blas_threads)  # as the function does (factory.build_service)
    embedder = HashingEmbedder(args.dim)
    corpus, rng = Corpus(), random.Random(n)
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    queries = corpus.queries(args.searches)
    out: dict[str, Any] = {"memories": n}
    with _table() as client:
        sizes: dict[tuple[str, str], int] = {}
        writer = DynamoDBMemoryStore(TABLE, client)
        serial = 0

        def fresh(count: int) -> list[MemoryRecord]:
            nonlocal serial
            batch = [_record(rng, corpus, serial + j, args.dim, args.coarse, t0) for j in range(count)]
            serial += count
            for r in batch:
                sizes[(items.partition_key(r.tenant, r.user_id), items.MEMORY_PREFIX + r.id)] = _item_size(r)
            return batch

        for _ in range(0, n, 500):
            writer.put(fresh(min(500, n - serial)))
        meter = Meter(client, sizes)
        coarse = np.vstack([np.asarray(r, np.float32) for r in _coarse_rows(client, n, args.coarse)])

        def timed(retriever: Retriever, query: str) -> tuple[float, float, int, float, int]:
            meter.reset()
            started = time.perf_counter()
            retriever.search(SearchRequest(tenant="acme", user_id="maya", query=query, top_k=10))
            wall = time.perf_counter() - started
            own = wall - meter.server_s
            modelled = meter.requests * args.request_ms / 1000 + meter.bytes / 1e6 * args.mb_ms / 1000
            return own, modelled, meter.requests, meter.rru, meter.bytes

        config = settings.retrieval
        # A container builds its retriever once (the category prototypes are embedded then).
        retriever = Retriever(DynamoDBMemoryStore(TABLE, client), embedder, config)

        def cold_container() -> Retriever:
            retriever.store = DynamoDBMemoryStore(TABLE, client)
            return retriever

        cold = [timed(cold_container(), q) for q in queries[: args.cold]]
        warm_store = DynamoDBMemoryStore(TABLE, client)
        retriever.store = warm_store
        timed(retriever, queries[0])
        warm = [timed(retriever, q) for q in queries]
        after = []
        for q in queries:
            writer.put(fresh(1))
            after.append(timed(retriever, q))
        floor = []
        for q in queries:
            v = coarse_prefix(embedder.embed([q])[0], args.coarse)
            started = time.perf_counter()
            scores = coarse @ v
            np.argpartition(-scores, 199)[:200]
            floor.append(time.perf_counter() - started)
        for name, runs in (("warm", warm), ("after write", after), ("cold", cold)):
            own = [r[0] * 1000 for r in runs]
            total = [(r[0] + r[1]) * 1000 for r in runs]
            out[name] = {
                "p50 ms": statistics.median(own),
                "p95 ms": _pct(own, 0.95),
                "with DynamoDB p50 ms": statistics.median(total),
                "with DynamoDB p95 ms": _pct(total, 0.95),
                "requests": statistics.median(r[2] for r in runs),
                "RRU": statistics.median(r[3] for r in runs),
                "MB read": statistics.median(r[4] for r in runs) / 1e6,
            }
        out["floor p50 ms"] = statistics.median(floor) * 1000
    return out


def _coarse_rows(client: Any, n: int, coarse: int) -> Iterator[np.ndarray]:
    """The user's coarse vectors as stored (the floor ranks exactly these)."""
    paginator = client.get_paginator("query")
    pages = paginator.paginate(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :m)",
        ExpressionAttributeValues={":pk": {"S": "acme#maya"}, ":m": {"S": items.MEMORY_PREFIX}},
        ProjectionExpression="emb_coarse",
    )
    for page in pages:
        for item in page["Items"]:
            raw = item["emb_coarse"]["B"]
            yield np.frombuffer(raw if isinstance(raw, bytes) else base64.b64decode(raw), dtype=np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="500,2000,20000")
    ap.add_argument("--dim", type=int, default=1024, help="embedding_dim (Titan V2 on the small tier)")
    ap.add_argument("--coarse", type=int, default=1024, help="coarse_dim (= dim: Titan is not Matryoshka)")
    ap.add_argument("--searches", type=int, default=40, help="searches per figure (warm, after write)")
    ap.add_argument("--cold", type=int, default=3, help="cold-container first searches per size")
    ap.add_argument("--request-ms", type=float, default=5.0, help="modelled DynamoDB time per request")
    ap.add_argument("--mb-ms", type=float, default=25.0, help="modelled DynamoDB time per MB returned")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results = [measure(int(s), args) for s in args.sizes.split(",")]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"model: {args.request_ms:g} ms per request + {args.mb_ms:g} ms per MB returned; "
        f"dim {args.dim}, coarse {args.coarse}"
    )
    print(
        "| memories | search | p50 ms | p95 ms | + DynamoDB p50 / p95 ms | requests | RRU | MB read "
        "| floor p50 ms |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        for name in ("warm", "after write", "cold"):
            f = r[name]
            print(
                f"| {r['memories']:,} | {name} | {f['p50 ms']:.1f} | {f['p95 ms']:.1f} | "
                f"{f['with DynamoDB p50 ms']:.0f} / {f['with DynamoDB p95 ms']:.0f} | {f['requests']:.0f} | "
                f"{f['RRU']:.0f} | {f['MB read']:.2f} | {r['floor p50 ms']:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
