"""One small, order-independent workload through the public API, and the invariants checked after it.

``Rig`` is a service over embedded adapters, each wrapped in ``Faulty``
(store, STM, queue, embedder, extractor, summariser, reranker), with one
clock for job and consolidation leases so a crashed worker's lease can be
made to run out without waiting. ``run_workload`` behaves as a client would:
it retries an add answered 503 (or not answered at all: the server crashed)
with the same body, lets the queue retry failed jobs, retries a
consolidation that found the lease of a crashed run, and retries a search.
``check_invariants`` then asserts what must hold whatever failed on the way.

The facts are independent (no fact updates another), so the order in which
retried jobs run does not change the outcome: a run with faults must end
exactly where a run without faults ends.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.leases import EmbeddedLeases
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.adapters.llm.rules.extractive_summariser import ExtractiveSummariser
from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.domain.extraction.apply import normalise_text
from memstack.domain.ingest import stm_memory_id
from memstack.errors import DependencyFailed
from memstack.factory import build_service
from memstack.models import MemoryFilters, Tier
from memstack.service import MemoryService
from memstack.settings import load_settings

from tests.api.conftest import Api, build_api
from tests.reliability.faults import Crash, Fail, Faulty

TENANT = "acme"
FACTS: dict[str, list[list[str]]] = {
    "ann": [
        ["I am allergic to peanuts.", "My sister is called Maya."],
        ["I play the cello on Sundays.", "I work as a nurse in Leeds.", "Thanks, that helps."],
    ],
    "bob": [["I drive a red Volvo.", "My dog is called Biscuit."], ["I collect vinyl records of jazz."]],
}
PORTS = ("store", "stm", "queue", "embedder", "extractor", "summariser", "reranker")
MAX_TRIES = 8


class Clock:
    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def pass_leases(self) -> None:
        """Enough time for every lease a crashed process left behind to run out."""
        self.now += 3600


class ScoreByOverlap:
    """A deterministic reranker: shared words between query and passage."""

    name = "overlap"

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        q = set(query.lower().split())
        return [float(len(q & set(p.lower().split()))) for p in passages]


@dataclass
class Rig:
    service: MemoryService
    api: Api
    db: Database
    clock: Clock
    ports: dict[str, Faulty]

    def close(self) -> None:
        self.service.close()
        self.db.close()


def make_rig(
    data_dir: Path,
    faults: dict[str, dict[str, Fail | list[Fail]]] | None = None,
    *,
    leases: Any = None,
    clock: Clock | None = None,
    **adapters: Any,
) -> Rig:
    """Embedded adapters (or the given ``adapters``: ``store=``, ``stm=``, ``queue=``), each in ``Faulty``."""
    faults = faults or {}
    settings = load_settings(data_dir=data_dir, embedder="hashing", reranker="none")
    db = Database(settings.db_path)
    clock = clock or Clock()
    real: dict[str, Any] = {
        "store": EmbeddedMemoryStore(db),
        "stm": EmbeddedShortTermStore(db),
        "queue": SqliteJobQueue(db, max_attempts=4, backoff_seconds=0.0, clock=clock),
        "embedder": HashingEmbedder(settings.embedding.embedding_dim),
        "extractor": RuleExtractor(),
        "summariser": ExtractiveSummariser(),
        "reranker": ScoreByOverlap(),
        **adapters,
    }
    ports = {name: Faulty(adapter, **faults.get(name, {})) for name, adapter in real.items()}
    # The faults strike the workload's calls; the start-up embedder check (a read, and a write the
    # first time) would take the first call of those operations (tests/conformance/test_embedder_switch.py).
    service = build_service(settings, embedder_check=False, **ports)
    service.leases = leases or EmbeddedLeases(db, clock=clock)  # the consolidator, built later, takes them
    return Rig(service, build_api(service, settings), db, clock, ports)


@dataclass
class Outcome:
    accepted: dict[str, list[str]] = field(default_factory=dict)  # user -> message ids answered 202
    refused: Counter[str] = field(default_factory=Counter)  # status/code of every non-2xx answer
    crashes: int = 0
    redriven: int = 0
    busy: int = 0


def _call(rig: Rig, outcome: Outcome, method: str, path: str, **kwargs: Any) -> tuple[int, Any] | None:
    """One request; None when the server "crashed" before answering (the client sees no response)."""
    try:
        return rig.api(method, path, **kwargs)
    except Crash:
        outcome.crashes += 1
        rig.clock.pass_leases()  # the process restarts: what it held is free again
        return None


def _until_ok(rig: Rig, outcome: Outcome, method: str, path: str, ok: int, **kwargs: Any) -> Any:
    for _ in range(MAX_TRIES):
        answer = _call(rig, outcome, method, path, **kwargs)
        if answer is None:
            continue
        status, body = answer
        if status == ok:
            return body
        code = body["error"]["code"]
        outcome.refused[f"{status} {code}"] += 1
        # Only these may tell a client "not now": a dependency outage, or a consolidation already running.
        assert (status, code) in {(503, "dependency_failed"), (409, "conflict")}, (status, body)
        if status == 409:
            outcome.busy += 1
            rig.clock.pass_leases()
    raise AssertionError(f"{method} {path} never succeeded: {outcome}")


def _edit(rig: Rig, outcome: Outcome, user: str, word: str, content: str | None) -> None:
    """PATCH (or, ``content=None``, DELETE) the user's memory mentioning ``word``, as a careful client.

    A retry after a lost answer finds the first attempt's effect: a 409 naming
    the new current version (which must hold our text) or a 404 for a deletion.
    """
    listing = _until_ok(rig, outcome, "GET", "/v1/memories", 200, query={"user_id": user, "tier": "ltm"})
    target = next(m for m in listing["memories"] if word in m["content"].lower())
    path, query = f"/v1/memories/{target['id']}", {"user_id": user}
    for _ in range(MAX_TRIES):
        if content is None:
            answer = _call(rig, outcome, "DELETE", path, query=query)
        else:
            answer = _call(rig, outcome, "PATCH", path, body={"user_id": user, "content": content})
        if answer is None:
            continue
        status, body = answer
        if status == 200:
            return
        code = body["error"]["code"]
        outcome.refused[f"{status} {code}"] += 1
        if status == 404 and content is None:
            return  # an earlier attempt deleted it
        if status == 409 and content is not None:
            current = body["error"]["details"][0]["current_id"]
            got = _until_ok(rig, outcome, "GET", f"/v1/memories/{current}", 200, query=query)
            assert got["content"] == content, "a concurrent writer, not our lost attempt, changed it"
            return
        assert (status, code) == (503, "dependency_failed"), (status, body)
    raise AssertionError(f"editing {path} never succeeded")


def settle(rig: Rig, outcome: Outcome) -> None:
    """Let the queue run everything (retries included); a crash mid-job is a worker restart."""
    queue = rig.ports["queue"].real
    for _ in range(MAX_TRIES):
        try:
            assert queue.drain(timeout=120)
        except Crash:
            outcome.crashes += 1
            rig.clock.pass_leases()
            continue
        except DependencyFailed:  # the queue service itself failed: the consumer starts again
            outcome.refused["queue"] += 1
            continue
        if not queue.dead_letters():
            return
        outcome.redriven += queue.redrive()
    raise AssertionError(f"the queue never settled: {queue.dead_letters()}")


def run_workload(rig: Rig) -> Outcome:
    outcome = Outcome()
    for user, batches in FACTS.items():
        for b, batch in enumerate(batches):
            ids = [f"{user}-{b}-{i}" for i in range(len(batch))]
            body = {
                "user_id": user,
                "session_id": "s1",
                "messages": [
                    {"id": i, "role": "user", "content": c} for i, c in zip(ids, batch, strict=True)
                ],
            }
            answer = _until_ok(rig, outcome, "POST", "/v1/memories", 202, body=body)
            assert answer["accepted"] == ids
            outcome.accepted.setdefault(user, []).extend(ids)
    settle(rig, outcome)
    _edit(rig, outcome, "ann", "cello", "Ann plays the cello on Saturdays.")
    _edit(rig, outcome, "bob", "volvo", None)
    for user in FACTS:
        _until_ok(rig, outcome, "POST", "/v1/consolidations", 200, body={"user_id": user, "sync": True})
        found = _until_ok(
            rig, outcome, "POST", "/v1/memories/search", 200, body={"user_id": user, "query": "what do I do"}
        )
        assert all(r["user_id"] == user for r in found["results"])
    settle(rig, outcome)
    return outcome


def state(rig: Rig) -> dict[str, list[tuple[str, str, tuple[str, ...]]]]:
    """Every user's current memories as (tier, normalised text, sources): what two runs must agree on."""
    out = {}
    store = rig.ports["store"].real
    for user in FACTS:
        records, _ = store.list(TENANT, user, MemoryFilters(), 1000, None)
        out[user] = sorted(
            (str(r.tier), normalise_text(r.content), tuple(sorted(r.source_ids))) for r in records
        )
    return out


def check_invariants(rig: Rig, outcome: Outcome, reference: dict[str, Any] | None = None) -> None:
    store, stm = rig.ports["store"].real, rig.ports["stm"].real
    for user, ids in outcome.accepted.items():
        # No accepted message is lost: in the short-term store, indexed, and extracted.
        assert all(stm.get(TENANT, user, i) is not None for i in ids), "an accepted message is not stored"
        turns = store.get_many(TENANT, user, [stm_memory_id(TENANT, user, i) for i in ids])
        assert len(turns) == len(ids), "an accepted message is not indexed"
        assert stm.unextracted(TENANT, user, ids) == {}, "an accepted message was never extracted"
        # No duplicate memory: one current record per (text, sources).
        records, _ = store.list(TENANT, user, MemoryFilters(tier=Tier.LTM), 1000, None)
        keys = Counter((normalise_text(r.content), tuple(sorted(r.source_ids))) for r in records)
        assert max(keys.values(), default=1) == 1, f"duplicate memories: {keys.most_common(3)}"
        # Nothing of anyone else.
        assert all(s.startswith(f"{user}-") for r in records for s in r.source_ids)
    assert rig.ports["queue"].real.dead_letters() == []
    if reference is not None:
        assert state(rig) == reference, "the run with faults did not converge to the run without"


@dataclass(frozen=True)
class Scenario:
    port: str
    method: str
    call: int
    kind: str  # "outage": DependencyFailed before the call; "crash": the process dies right after it

    @property
    def id(self) -> str:
        return f"{self.port}.{self.method}#{self.call}-{self.kind}"


def reference_calls(data_dir: Path) -> tuple[dict[str, Any], dict[str, Counter[str]]]:
    """The fault-free outcome and how often the workload calls each port method."""
    rig = make_rig(data_dir)
    try:
        check_invariants(rig, run_workload(rig))
        return state(rig), {name: Counter(p.calls) for name, p in rig.ports.items()}
    finally:
        rig.close()


def scenarios(calls: dict[str, Counter[str]]) -> Iterator[Scenario]:
    """Every port method the workload calls, failing on its first and on its last call, both ways."""
    for port in PORTS:
        for method, n in sorted(calls[port].items()):
            if method in (
                "set_handler",
                "tenant_config_store",
                "close",
                "dead_letters",
                "redrive",
                "pending",
            ):
                continue  # wiring (build_service asks for them) and the test's own inspection, not work
            for call in sorted({1, n}):
                for kind in ("outage", "crash"):
                    yield Scenario(port, method, call, kind)


def fault_for(s: Scenario) -> dict[str, dict[str, Fail | list[Fail]]]:
    if s.kind == "outage":
        fail = Fail(DependencyFailed(f"{s.port} is down (injected)"), on_call=s.call)
    else:
        fail = Fail(Crash(), after=True, on_call=s.call)
    return {s.port: {s.method: fail}}
