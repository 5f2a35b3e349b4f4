"""One consolidation per user at a time (issue 12, item 4): overlapping runs converge to the result of one.

Two runs of one user at once (API + scheduler + CLI) used to each summarise
the same turns: 117 LTM memories against 63 for one run, 53 exact duplicates.
A per-user lease (SQLite locally, a conditional DynamoDB item in AWS) lets
one run; the other answers "busy" (the API: 409) having written nothing.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.dynamodb.leases import DynamoDbLeases
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.leases import EmbeddedLeases
from memstack.factory import build_service
from memstack.service import MemoryService

from tests.api.conftest import KEYS, build_api
from tests.consolidation.conftest import NOW, conversation, make_settings, shape
from tests.consolidation.test_dynamodb_stm import TABLE

T, U = "acme", "sam"


class Gate:
    """A summariser whose first call stops until released: run A is paused inside its work."""

    def __init__(self, real: Any) -> None:
        self.real, self.name = real, real.name
        self.inside, self.release = threading.Event(), threading.Event()
        self.calls = 0

    def summarise(self, texts: list[str], max_tokens: int) -> str:
        self.calls += 1
        if self.calls == 1:
            self.inside.set()
            assert self.release.wait(60), "the test never released run A"
        return self.real.summarise(texts, max_tokens)

    def synthesise(self, summaries: list[str], existing: list[Any], max_tokens: int) -> list[str]:
        return self.real.synthesise(summaries, existing, max_tokens)


def _reference_shape(tmp_path: Path) -> list[tuple[object, ...]]:
    svc = build_service(make_settings(tmp_path / "reference"))
    svc.add(T, U, conversation(), infer=False)
    svc.consolidate(T, U, now=NOW)
    result = shape(svc, T, U)
    svc.close()
    return result


def test_overlapping_runs_converge_to_the_result_of_one(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    first, second = build_service(settings), build_service(settings)  # e.g. the API and the CLI
    first.add(T, U, conversation(), infer=False)
    assert first.consolidator is not None
    gate = Gate(first.consolidator.summariser)
    first.consolidator.summariser = gate
    reports: list[dict[str, Any]] = []
    run_a = threading.Thread(target=lambda: reports.append(first.consolidate(T, U, now=NOW)))
    run_a.start()
    assert gate.inside.wait(60)
    overlapping = second.consolidate(T, U, now=NOW)  # while A is in the middle of its run
    gate.release.set()
    run_a.join(60)
    assert overlapping["status"] == "busy" and overlapping["written"] == 0
    assert reports[0]["status"] == "done" and reports[0]["written"] > 0
    assert second.consolidate(T, U, now=NOW)["status"] == "nothing_to_do"  # the lease was given back
    got = shape(first, T, U)
    assert got == _reference_shape(tmp_path)
    duplicates = [k for k, n in Counter((c, tuple(s)) for *_, c, s in got).items() if n > 1]
    assert duplicates == []
    first.close()
    second.close()


def test_the_api_answers_409_while_a_consolidation_of_the_user_runs(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    service = build_service(settings)
    service.add(T, U, conversation(), infer=False)
    leases = EmbeddedLeases(Database(settings.db_path))
    assert leases.acquire(T, U, "consolidation", "another-run", 60)
    api = build_api(service, settings)
    tenant_key = next(k for k, t in KEYS.items() if t == T)
    status, body = api("POST", "/v1/consolidations", body={"user_id": U, "sync": True}, key=tenant_key)
    assert status == 409 and body["error"]["code"] == "conflict" and U in body["error"]["message"]
    leases.release(T, U, "consolidation", "another-run")
    status, body = api("POST", "/v1/consolidations", body={"user_id": U, "sync": True}, key=tenant_key)
    assert status == 200 and body["status"] == "done"
    service.close()


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def _lease_contract(leases: Any, clock: Clock) -> None:
    assert leases.acquire(T, U, "consolidation", "a", 30)
    assert not leases.acquire(T, U, "consolidation", "b", 30)
    assert leases.acquire(T, "other-user", "consolidation", "b", 30)  # per user
    assert leases.acquire(T, U, "consolidation", "a", 30)  # the holder may take it again
    clock.now += 20
    assert leases.renew(T, U, "consolidation", "a", 30)
    clock.now += 20  # 40 s after taking it, 20 s after renewing: still held
    assert not leases.acquire(T, U, "consolidation", "b", 30)
    assert not leases.renew(T, U, "consolidation", "b", 30)
    clock.now += 31  # the holder died: its lease ran out
    assert leases.acquire(T, U, "consolidation", "b", 30)
    assert not leases.renew(T, U, "consolidation", "a", 30)
    leases.release(T, U, "consolidation", "a")  # not the holder: a no-op
    assert not leases.acquire(T, U, "consolidation", "c", 30)
    leases.release(T, U, "consolidation", "b")
    assert leases.acquire(T, U, "consolidation", "c", 30)


def test_embedded_leases(tmp_path: Path) -> None:
    clock = Clock()
    db = Database(tmp_path / "l.sqlite3")
    _lease_contract(EmbeddedLeases(db, clock=clock), clock)
    db.close()


def test_dynamodb_leases_are_conditional_items_in_the_stm_table(ddb: Any) -> None:
    clock = Clock()
    _lease_contract(DynamoDbLeases(TABLE, client=ddb, clock=clock), clock)
    item = ddb.get_item(TableName=TABLE, Key={"pk": {"S": f"{T}#{U}"}, "sk": {"S": "lease#consolidation"}})
    assert item["Item"]["owner"] == {"S": "c"} and "expires_at" in item["Item"]  # TTL cleans leftovers


def test_a_crashed_runs_lease_blocks_only_until_it_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path / "data")
    service = build_service(settings)
    service.add(T, U, conversation(), infer=False)
    assert service.consolidator is not None and isinstance(service.consolidator.leases, EmbeddedLeases)
    clock = Clock()
    service.consolidator.leases.clock = clock
    assert service.consolidator.leases.acquire(T, U, "consolidation", "crashed-run", 120)
    assert service.consolidate(T, U, now=NOW)["status"] == "busy"
    clock.now += 121
    assert service.consolidate(T, U, now=NOW)["status"] == "done"
    service.close()


def test_consolidations_of_different_users_do_not_wait_for_each_other(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "data")
    service: MemoryService = build_service(settings)
    for user in ("sam", "kim"):
        service.add(T, user, conversation(prefix=user), infer=False)
    leases = EmbeddedLeases(Database(settings.db_path))
    assert leases.acquire(T, "sam", "consolidation", "another-run", 60)
    assert service.consolidate(T, "kim", now=NOW)["status"] == "done"
    assert service.consolidate(T, "sam", now=NOW)["status"] == "busy"
    service.close()
