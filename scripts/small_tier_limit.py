#!/usr/bin/env python3
"""How many memories one user can hold on the small tier (``dynamodb`` store) before search gets slow.

A search on the small tier ranks the user's whole partition inside the API
function. While nothing was written, the container's cached snapshot answers
at numpy speed; after a write, the next search re-reads the partition
(consistent Query, 1 MB pages) and rebuilds the snapshot. This measures the
part that runs in the function (parsing each page as botocore does, building
the snapshot, one search), for several partition sizes, and adds DynamoDB's
share from a stated per-page latency. Run it: ``.venv/bin/python scripts/small_tier_limit.py``.

Figures are medians of ``--runs`` runs; the floor is ``json.loads`` of the
same bytes, measured in the same run, so the ratio says how far above plain
JSON parsing the work is on whatever machine this is.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

import numpy as np
from botocore.parsers import create_parser
from botocore.session import get_session
from memstack.adapters.dynamodb import items
from memstack.adapters.dynamodb.snapshot import Snapshot
from memstack.models import MemoryFilters, MemoryRecord

PAGE_BYTES = 1_000_000  # a Query returns at most 1 MB per page
RRU_BYTES = 4096  # one read request unit reads 4 KB strongly consistently
#: DynamoDB's own time per 1 MB Query page, service + network inside the Region (assumed, not measured here)
PAGE_LATENCY_S = 0.030
BUDGET_S = 0.5  # the retrieval p95 alarm's default threshold


def wire(value: dict) -> dict:
    """An attribute value as DynamoDB's JSON protocol carries it (binary as base64)."""
    ((kind, raw),) = value.items()
    if kind == "B":
        return {"B": base64.b64encode(raw).decode()}
    if kind == "M":
        return {"M": {k: wire(v) for k, v in raw.items()}}
    if kind == "L":
        return {"L": [wire(v) for v in raw]}
    return value


def partition(n: int, dim: int, coarse: int) -> tuple[list[dict], int]:
    """The projected rows a search reads, and the partition's full size (what the read is billed on)."""
    rng = np.random.default_rng(7)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out, full_bytes = [], 0
    for i in range(n):
        full = rng.standard_normal(dim).astype(np.float32)
        full /= np.linalg.norm(full)
        record = MemoryRecord(
            tenant="acme",
            user_id="maya",
            content=f"Maya mentioned fact number {i}: she likes hiking near Sintra on weekends.",
            created_at=t0 + timedelta(minutes=i),
            embedding_full=full.tolist(),
            embedding_coarse=(full[:coarse] / np.linalg.norm(full[:coarse])).tolist(),
            source_ids=[f"msg-{i}"],
        )
        item = {k: wire(v) for k, v in items.to_item(record).items()}
        full_bytes += item_bytes(item)
        out.append({k: v for k, v in item.items() if k in items.SEARCH_ATTRIBUTES})
    return out, full_bytes


def item_bytes(item: dict) -> int:
    """DynamoDB's item size: attribute names plus values (binary counted decoded)."""
    size = 0
    for name, value in item.items():
        size += len(name)
        ((kind, raw),) = value.items()
        size += len(base64.b64decode(raw)) if kind == "B" else len(json.dumps(raw))
    return size


def pages(rows: list[dict]) -> list[bytes]:
    out, page, size = [], [], 0
    for row in rows:
        page.append(row)
        size += len(json.dumps(row))
        if size >= PAGE_BYTES:
            out.append(json.dumps({"Items": page, "Count": len(page)}).encode())
            page, size = [], 0
    if page:
        out.append(json.dumps({"Items": page, "Count": len(page)}).encode())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,1000,2000,5000,10000")
    ap.add_argument("--dim", type=int, default=1024, help="embedding_dim (Titan V2 on the small tier)")
    ap.add_argument("--coarse", type=int, default=1024, help="coarse_dim (= dim: Titan is not Matryoshka)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    model = get_session().get_service_model("dynamodb").operation_model("Query")
    parser = create_parser("json")
    query = np.ones(args.coarse, dtype=np.float32) / np.sqrt(args.coarse)
    print(
        "| memories | partition MB (billed) | pages read | RRU per rebuild | in-function s | floor s "
        f"| ratio | est. rebuild s (+{PAGE_LATENCY_S * 1000:.0f} ms/page) | warm search s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        rows, total = partition(n, args.dim, args.coarse)
        bodies = pages(rows)
        work, floor, warm = [], [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            for body in bodies:
                json.loads(body)
            floor.append(time.perf_counter() - t)
            t = time.perf_counter()
            parsed = []
            for body in bodies:
                answer = parser.parse({"body": body, "headers": {}, "status_code": 200}, model.output_shape)
                parsed.extend(answer["Items"])
            snapshot = Snapshot("gen", parsed)
            work.append(time.perf_counter() - t)
            t = time.perf_counter()
            snapshot.vector_search(query, 200, MemoryFilters())
            snapshot.bm25_search("where does Maya go hiking", 200, MemoryFilters())
            warm.append(time.perf_counter() - t)
        w, f = statistics.median(work), statistics.median(floor)
        rebuild = w + len(bodies) * PAGE_LATENCY_S
        print(
            f"| {n:,} | {total / 1e6:.1f} | {len(bodies)} | {total // RRU_BYTES + 1:,} | {w:.3f} | {f:.3f} | "
            f"{w / f:.1f} | {rebuild:.2f}{' (over budget)' if rebuild > BUDGET_S else ''} | "
            f"{statistics.median(warm):.3f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
