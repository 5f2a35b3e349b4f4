"""Soak: N clients on loopback for S seconds of mixed traffic, then a consistency check of every store.

    memstack bench soak --clients 8 --seconds 60            # embedded default, hashing embedder
    memstack bench soak --clients 4 --seconds 300 --embedder minilm --json
    python scripts/soak.py --clients 8 --seconds 60         # the same, without the CLI

A real ``memstack serve`` server (waitress, the local queue's worker thread)
runs in this process on a free loopback port, over a fresh data directory.
The clients share 3 tenants x 3 users and send adds (some ``sync``),
searches, paged lists, reads, edits, deletes, histories, consolidations,
erases and health checks, as fast as they can. Then traffic stops, the
queue drains, and every store is checked:

* every accepted message is stored, indexed and extracted, unless an erase
  of its user started after it was accepted, in which case nothing of it is
  left anywhere (STM, memories, jobs);
* no read returned, and no store holds for a user, anything of another user;
* no duplicate current memory; every version chain linear;
* a deleted memory is never current and never found by search;
* no job is dead-lettered.

It prints the operations, the errors (5xx, connection), the refusals by
code, p50/p95 per operation with the ratio to ``GET /v1/health`` measured in
the same run (the floor), and each invariant held or broken; the exit code
is 1 when any invariant broke.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.api.wsgi_server import make_server, running_in_thread
from memstack.client import MemoryApiError, MemoryClient
from memstack.domain.extraction.apply import normalise_text
from memstack.domain.ingest import stm_memory_id
from memstack.domain.retrieval.types import SearchRequest
from memstack.factory import build_service
from memstack.models import MemoryFilters, Tier
from memstack.service import MemoryService
from memstack.settings import load_settings

TENANTS = {"soak-key-a": "alpha", "soak-key-b": "beta", "soak-key-c": "gamma"}
USERS = ("ann", "bob", "cy")
SENTENCES = [
    "I live in Lisbon.",
    "I moved to Porto last month.",
    "I am allergic to peanuts.",
    "My dog is called Biscuit.",
    "I work as a nurse at the city hospital.",
    "I love hiking in the mountains on weekends.",
    "I don't have a dog anymore.",
    "My sister Maya lives in Boston.",
    "I prefer tea to coffee in the morning.",
    "I play the cello on Sundays.",
    "I am learning Japanese for a trip to Kyoto.",
    "We adopted a cat named Miso.",
]
QUERIES = ["where do I live", "what pets do I have", "what can't I eat", "what is my job", "hobbies"]
# How often each operation is picked (relative weights).
MIX = {
    "add": 30,
    "search": 25,
    "list": 10,
    "get": 8,
    "patch": 8,
    "history": 6,
    "health": 5,
    "delete": 4,
    "consolidate": 3,
    "erase": 1,
}


@dataclass
class Owner:
    key: str
    user: str

    @property
    def tenant(self) -> str:
        return TENANTS[self.key]

    @property
    def prefix(self) -> str:
        return f"{self.tenant}.{self.user}."


@dataclass
class Traffic:
    """What the clients did and saw, shared between their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)  # 5xx and connection failures, by operation
    refusals: Counter[str] = field(default_factory=Counter)  # 4xx by "operation status code"
    violations: list[str] = field(default_factory=list)  # seen during traffic (a read of another user's data)
    # (owner index, message id, request sent, answer received, infer), monotonic seconds
    accepted: list[tuple[int, str, float, float, bool]] = field(default_factory=list)
    erases: list[tuple[int, float, float]] = field(default_factory=list)  # (owner index, sent, answered)
    known: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    deleted: list[tuple[int, str]] = field(default_factory=list)

    def timed(self, op: str, started: float) -> None:
        with self.lock:
            self.latencies[op].append((time.perf_counter() - started) * 1000)


OWNERS = [Owner(key, user) for key in TENANTS for user in USERS]


def _owned(traffic: Traffic, o: int, memories: list[dict[str, Any]], op: str) -> None:
    owner = OWNERS[o]
    for m in memories:
        if m["user_id"] != owner.user or not all(s.startswith(owner.prefix) for s in m["source_ids"]):
            with traffic.lock:
                traffic.violations.append(f"{op} for {owner.tenant}/{owner.user} returned {m['id']}")
            continue
        with traffic.lock:
            traffic.known[o].add(m["id"])


def _pick_known(traffic: Traffic, rng: random.Random, o: int) -> str | None:
    with traffic.lock:
        ids = sorted(traffic.known[o])
    return rng.choice(ids) if ids else None


def one_operation(
    op: str, client: MemoryClient, traffic: Traffic, rng: random.Random, o: int, seq: list[int], name: str
) -> None:
    owner = OWNERS[o]
    user = owner.user
    if op == "add":
        ids = []
        for _ in range(rng.randint(1, 3)):
            seq[0] += 1
            ids.append(f"{owner.prefix}{name}-{seq[0]}")
        infer, sync = rng.random() < 0.9, rng.random() < 0.2
        body = {
            "user_id": user,
            "session_id": "soak",
            "infer": infer,
            "sync": sync,
            "messages": [{"id": i, "role": "user", "content": rng.choice(SENTENCES)} for i in ids],
        }
        sent = time.monotonic()
        answer = client.request("POST", "/v1/memories", body=body)
        answered = time.monotonic()
        with traffic.lock:
            traffic.accepted += [(o, i, sent, answered, infer) for i in answer["accepted"]]
    elif op == "search":
        body = {
            "user_id": user,
            "query": rng.choice(QUERIES),
            "top_k": 10,
            "include_history": rng.random() < 0.2,
        }
        _owned(traffic, o, client.request("POST", "/v1/memories/search", body=body)["results"], op)
    elif op == "list":
        cursor = None
        for _ in range(20):
            query = {"user_id": user, "limit": 20, "cursor": cursor}
            page = client.request("GET", "/v1/memories", query=query)
            _owned(traffic, o, page["memories"], op)
            cursor = page["next_cursor"]
            if cursor is None:
                break
    elif op in ("get", "patch", "history", "delete"):
        memory_id = _pick_known(traffic, rng, o)
        if memory_id is None:
            return
        path = f"/v1/memories/{memory_id}"
        if op == "get":
            _owned(traffic, o, [client.request("GET", path, query={"user_id": user})], op)
        elif op == "history":
            _owned(
                traffic, o, client.request("GET", f"{path}/history", query={"user_id": user})["memories"], op
            )
        elif op == "patch":
            body = {"user_id": user, "content": rng.choice(SENTENCES)}
            _owned(traffic, o, [client.request("PATCH", path, body=body)], op)
        else:
            client.request("DELETE", path, query={"user_id": user})
            with traffic.lock:
                traffic.deleted.append((o, memory_id))
    elif op == "consolidate":
        client.request("POST", "/v1/consolidations", body={"user_id": user, "sync": True})
    elif op == "erase":
        sent = time.monotonic()
        try:
            client.request("DELETE", f"/v1/users/{user}")
        finally:  # even unanswered, it may have run: its window counts
            with traffic.lock:
                traffic.erases.append((o, sent, time.monotonic()))
        with traffic.lock:
            traffic.known[o].clear()
    elif op == "health":
        client.request("GET", "/v1/health")


def client_loop(
    url: str, traffic: Traffic, seed: int, deadline: float, name: str, min_operations: int = 0
) -> None:
    """Mixed traffic until the deadline, and at least ``min_operations`` of it whatever the clock says
    (a smoke test on a loaded machine counts work, not wall time)."""
    rng = random.Random(seed)
    clients = {key: MemoryClient(url, api_key=key, timeout=120) for key in TENANTS}
    ops, weights = zip(*MIX.items(), strict=True)
    seq = [0]
    done = 0
    while time.monotonic() < deadline or done < min_operations:
        done += 1
        op = rng.choices(ops, weights)[0]
        o = rng.randrange(len(OWNERS))
        started = time.perf_counter()
        try:
            one_operation(op, clients[OWNERS[o].key], traffic, rng, o, seq, name)
        except MemoryApiError as exc:
            with traffic.lock:
                if exc.status >= 500 or exc.status == 0:
                    traffic.errors[f"{op} {exc.status} {exc.code}"] += 1
                else:
                    traffic.refusals[f"{op} {exc.status} {exc.code}"] += 1
        traffic.timed(op, started)
    for c in clients.values():
        c.close()


# -------------------------------------------------------------------- checks
def check_stores(service: MemoryService, traffic: Traffic) -> dict[str, list[str]]:
    """Each invariant and the violations found (an empty list: it held)."""
    found: dict[str, list[str]] = {
        "no read returned another user's data": list(traffic.violations),
        "accepted messages stored, indexed and extracted": [],
        "erased messages gone from every store": [],
        "stores hold nothing of another user": [],
        "no duplicate current memory": [],
        "version chains linear": [],
        "deleted memories never current nor found": [],
        "no dead-lettered job": [],
    }
    erases: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for o, sent, answered in traffic.erases:
        erases[o].append((sent, answered))
    db = getattr(service.queue, "db", None)
    for o, message_id, sent, answered, infer in traffic.accepted:
        owner = OWNERS[o]
        t, u = owner.tenant, owner.user
        entry = service.stm.get(t, u, message_id)
        if any(erase_sent > answered for erase_sent, _ in erases[o]):
            # An erase was sent after this add was answered: nothing of the message may be left.
            left = []
            if entry is not None:
                left.append("stm")
            if service.store.get(t, u, stm_memory_id(t, u, message_id)) is not None:
                left.append("stm memory")
            if service.store.find_by_source(t, u, message_id):
                left.append("memories made from it")
            if (
                db is not None
                and db.read()
                .execute("SELECT 1 FROM jobs WHERE body LIKE ?", (f'%"{message_id}"%',))
                .fetchone()
            ):
                left.append("jobs")
            if left:
                found["erased messages gone from every store"].append(f"{message_id}: {', '.join(left)}")
            continue
        if any(erase_answered > sent for _, erase_answered in erases[o]):
            continue  # the add and an erase overlapped: either order is right
        problems = []
        if entry is None:
            problems.append("not in STM")
        if service.store.get(t, u, stm_memory_id(t, u, message_id)) is None:
            problems.append("not indexed")
        if infer and entry is not None and entry.extraction == "pending":
            problems.append("never extracted")
        if problems:
            found["accepted messages stored, indexed and extracted"].append(f"{message_id}: {problems}")
    for owner in OWNERS:
        records, _ = service.store.list(
            owner.tenant, owner.user, MemoryFilters(include_superseded=True), 100_000, None
        )
        current: Counter[tuple[str, tuple[str, ...]]] = Counter()
        for r in records:
            if r.user_id != owner.user or not all(s.startswith(owner.prefix) for s in r.source_ids):
                found["stores hold nothing of another user"].append(f"{owner.tenant}/{owner.user}: {r.id}")
            if r.tier == Tier.LTM and r.is_current and not r.deleted:
                current[(normalise_text(r.content), tuple(sorted(r.source_ids)))] += 1
        found["no duplicate current memory"] += [
            f"{owner.tenant}/{owner.user}: {text!r} x{n}" for (text, _), n in current.items() if n > 1
        ]
        for r in records:
            if r.is_current:
                _check_chain(service, owner, r.id, found["version chains linear"])
    for o, memory_id in traffic.deleted[:200]:  # each answered 200
        owner = OWNERS[o]
        record = service.store.get(owner.tenant, owner.user, memory_id)
        if record is None:
            continue  # erased since
        request = SearchRequest(
            tenant=owner.tenant, user_id=owner.user, query=record.content, top_k=50, include_history=True
        )
        if record.is_current or memory_id in {h.record.id for h in service.search(request).hits}:
            found["deleted memories never current nor found"].append(memory_id)
    found["no dead-lettered job"] = [d["id"] for d in (service.queue.dead_letters() if service.queue else [])]
    return found


def _check_chain(service: MemoryService, owner: Owner, memory_id: str, out: list[str]) -> None:
    chain = service.history(owner.tenant, owner.user, memory_id)
    versions = [r.version for r in chain]
    linear = versions == list(range(versions[0], versions[0] + len(versions)))
    linked = all(b.replaces_id == a.id for a, b in itertools.pairwise(chain))
    if not (linear and linked and sum(r.is_current for r in chain) == 1 and chain[-1].is_current):
        out.append(f"{owner.tenant}/{owner.user}: {memory_id} {versions}")


# -------------------------------------------------------------------- report
def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def summary(
    traffic: Traffic, invariants: dict[str, list[str]], seconds: float, clients: int
) -> dict[str, Any]:
    floor = statistics.median(traffic.latencies["health"]) if traffic.latencies["health"] else float("nan")
    per_op = {
        op: {
            "count": len(v),
            "p50_ms": round(percentile(v, 0.5), 2),
            "p95_ms": round(percentile(v, 0.95), 2),
            "p50_vs_floor": round(percentile(v, 0.5) / floor, 1) if floor == floor and floor > 0 else None,
        }
        for op, v in sorted(traffic.latencies.items())
    }
    everything = [x for v in traffic.latencies.values() for x in v]
    return {
        "clients": clients,
        "seconds": round(seconds, 1),
        "operations": len(everything),
        "ops_per_second": round(len(everything) / seconds, 1) if seconds else None,
        "errors": sum(traffic.errors.values()),
        "errors_by_kind": dict(traffic.errors),
        "refusals_by_kind": dict(traffic.refusals),
        "p50_ms": round(percentile(everything, 0.5), 2),
        "p95_ms": round(percentile(everything, 0.95), 2),
        "floor_health_p50_ms": round(floor, 2),
        "per_operation": per_op,
        "messages_accepted": len(traffic.accepted),
        "erases": len(traffic.erases),
        "invariants": {name: {"held": not bad, "violations": bad[:10]} for name, bad in invariants.items()},
    }


def print_summary(s: dict[str, Any]) -> None:
    print(
        f"{s['operations']} operations by {s['clients']} clients in {s['seconds']} s "
        f"({s['ops_per_second']}/s): {s['errors']} errors, p50 {s['p50_ms']} ms, p95 {s['p95_ms']} ms "
        f"(floor: GET /v1/health p50 {s['floor_health_p50_ms']} ms)"
    )
    print(f"{'operation':<12}{'count':>8}{'p50 ms':>10}{'p95 ms':>10}{'p50/floor':>11}")
    for op, row in s["per_operation"].items():
        print(f"{op:<12}{row['count']:>8}{row['p50_ms']:>10}{row['p95_ms']:>10}{row['p50_vs_floor']!s:>11}")
    if s["errors_by_kind"]:
        print("errors:", s["errors_by_kind"])
    print("refusals (4xx):", s["refusals_by_kind"] or "none")
    print(f"messages accepted: {s['messages_accepted']}, erases: {s['erases']}")
    for name, result in s["invariants"].items():
        mark = "held" if result["held"] else "BROKEN"
        print(f"  [{mark}] {name}" + ("" if result["held"] else f": {result['violations']}"))


# ---------------------------------------------------------------------- main
def run(
    clients: int, seconds: float, data_dir: Path, embedder: str, seed: int, min_operations: int = 0
) -> dict[str, Any]:
    # waitress warns whenever a request waits for a free thread: under a soak that is the point;
    # and one log line per request and per search would bury the summary.
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    for name in ("memstack-api", "memstack"):
        logging.getLogger(name).setLevel(logging.WARNING)
    settings = load_settings(
        data_dir=data_dir, embedder=embedder, api_keys=",".join(f"{k}={t}" for k, t in TENANTS.items())
    )
    service = build_service(settings)
    server, api = make_server(service, settings, host="127.0.0.1", port=0, threads=max(4, clients))
    with running_in_thread(server, name="soak-server") as url:
        assert service.queue is not None and hasattr(service.queue, "start_worker")
        service.queue.start_worker(poll_seconds=0.2)
        traffic = Traffic()
        started = time.monotonic()
        deadline = started + seconds
        workers = [
            threading.Thread(
                target=client_loop,
                args=(url, traffic, seed + i, deadline, f"c{i}", min_operations),
                daemon=True,
            )
            for i in range(clients)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.monotonic() - started
        assert isinstance(service.queue, SqliteJobQueue)  # the soak runs on the embedded default
        service.queue.stop_worker()
        service.queue.drain(timeout=600)
    invariants = check_stores(service, traffic)
    api.close()
    service.close()
    return summary(traffic, invariants, elapsed, clients)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--embedder", default="hashing", choices=["hashing", "minilm"])
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a fresh temporary directory")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--min-operations", type=int, default=0, help="per client, however long it takes")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memstack-soak-") as tmp:
        result = run(
            args.clients,
            args.seconds,
            args.data_dir or Path(tmp),
            args.embedder,
            args.seed,
            args.min_operations,
        )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_summary(result)
    return 0 if all(v["held"] for v in result["invariants"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
