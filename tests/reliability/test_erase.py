"""Erase is complete and final (issue 12, item 1).

After ``DELETE /v1/users/{id}`` nothing of the user is left in any table,
index, queue, dead-letter list, lease or idempotency record, nor anywhere in
the bytes of the SQLite file and its WAL; and a job that was running when
the erase came cannot bring the user back.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from memstack.domain.erasure import Erased
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message
from memstack.ports.queue import Job
from memstack.settings import load_settings

from tests.api.conftest import build_api
from tests.consolidation.conftest import NOW, conversation

T = "acme"
# Words that appear nowhere else in the file: only this user said them.
SECRET_WORDS = ["zanzibarquux", "plovdivorama", "quetzalbyte"]


def _file_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(data_dir.glob("memstack.sqlite3*")))


def _rows_naming(db: Any, user: str, words: list[str]) -> dict[str, int]:
    """Rows of every table that name the user or hold one of the words (an SQL scan of every table)."""
    conn = db.read()
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    found = {}
    for table in tables:
        try:
            rows = conn.execute(f"SELECT * FROM {table}").fetchall()
        except Exception:  # an FTS shadow table that cannot be read directly
            continue
        hits = [r for r in rows if any(user == str(v) or any(w in str(v) for w in words) for v in tuple(r))]
        if hits:
            found[table] = len(hits)
    return found


def test_erase_leaves_nothing_of_the_user_in_any_store_nor_in_the_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = load_settings(data_dir=data_dir, embedder="hashing", queue_max_attempts=1)
    service = build_service(settings)
    api = build_api(service, settings)
    secret = " and ".join(f"I keep a {w}" for w in SECRET_WORDS)
    key = {"headers": {"Idempotency-Key": "erase-me-1"}}
    turns = [{"id": f"ann-{i}", "role": "user", "content": f"{secret} number {i}."} for i in range(6)]
    assert api("POST", "/v1/memories", body={"user_id": "ann", "messages": turns}, **key)[0] == 202
    assert (
        api(
            "POST",
            "/v1/memories",
            body={"user_id": "bob", "messages": [{"role": "user", "content": "I keep bees."}]},
        )[0]
        == 202
    )
    assert service.queue is not None and service.queue.drain(timeout=60)
    assert api("POST", "/v1/consolidations", body={"user_id": "ann", "sync": True})[0] == 200
    # A dead-lettered job of the user, and one still waiting.
    service.queue.send([Job(type="extract", tenant=T, user_id="ann", payload={"message_id": "gone"})])
    service.job_handlers["extract"], real = (
        (lambda j: (_ for _ in ()).throw(RuntimeError("boom"))),
        service.job_handlers["extract"],
    )
    service.queue.drain(timeout=60)
    service.job_handlers["extract"] = real
    assert service.queue.dead_letters()
    service.queue.send([Job(type="consolidate", tenant=T, user_id="ann")])
    assert SECRET_WORDS[0].encode() in _file_bytes(data_dir)  # the test can see the words before

    status, answer = api("DELETE", "/v1/users/ann")
    assert status == 200
    erased = answer["erased"]
    assert (
        erased["stm"] == 6 and erased["memories"] >= 6 and erased["jobs"] == 2 and erased["idempotency"] == 1
    )

    db = service.store.db  # type: ignore[attr-defined]
    assert _rows_naming(db, "ann", SECRET_WORDS) == {}
    assert service.queue.dead_letters() == []
    assert service.store.list(T, "ann", MemoryFilters(include_superseded=True), 100, None)[0] == []
    raw = _file_bytes(data_dir)
    leaked = [w for w in SECRET_WORDS if w.encode() in raw or w[:8].encode() in raw]
    assert leaked == [], f"erased words still in the SQLite file or its WAL: {leaked}"
    # Bob is untouched, and Ann can start again.
    assert api("GET", "/v1/memories", query={"user_id": "bob"})[1]["memories"]
    assert (
        api(
            "POST",
            "/v1/memories",
            body={"user_id": "ann", "sync": True, "messages": [{"role": "user", "content": "I am back."}]},
        )[0]
        == 200
    )
    service.close()


def test_a_job_running_when_the_erase_came_cannot_bring_the_user_back(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", embedder="hashing")
    service = build_service(settings)
    handler = service.job_handlers["extract"]
    real = handler.extractor
    inside, erased = threading.Event(), threading.Event()

    class SlowModel:
        name = "slow"

        def extract(self, message: Message, context: list, neighbours: list, guidance: Any = None) -> list:
            inside.set()  # the job has read the message and is waiting for the model
            assert erased.wait(60)
            return real.extract(message, context, neighbours)

    handler.extractor = SlowModel()
    service.add(T, "ann", [Message(id="m1", content="I moved to Osaka.")])
    assert service.queue is not None
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            service.queue.run_ready()  # type: ignore[union-attr]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=worker)
    thread.start()
    assert inside.wait(60)
    service.erase_user(T, "ann")
    erased.set()
    thread.join(60)
    assert errors == []
    assert service.store.list(T, "ann", MemoryFilters(include_superseded=True), 100, None)[0] == []
    handler.extractor = real
    assert service.queue.drain(timeout=60)  # the refused job's retry finds nothing to do
    assert service.store.list(T, "ann", MemoryFilters(include_superseded=True), 100, None)[0] == []
    assert service.queue.dead_letters() == []
    service.close()


def test_a_consolidation_running_when_the_erase_came_writes_nothing(tmp_path: Path) -> None:
    from memstack.adapters.llm.rules.extractive_summariser import ExtractiveSummariser

    settings = load_settings(data_dir=tmp_path / "data", embedder="hashing")
    service = build_service(settings)
    service.add(T, "sam", conversation(), infer=False)
    inside, erased = threading.Event(), threading.Event()

    class SlowSummariser(ExtractiveSummariser):
        def summarise(self, texts: list[str], max_tokens: int) -> str:
            inside.set()
            assert erased.wait(60)
            return super().summarise(texts, max_tokens)

    assert service.consolidator is not None
    service.consolidator.summariser = SlowSummariser()
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_run(service)))
    thread.start()
    assert inside.wait(60)
    service.erase_user(T, "sam")
    erased.set()
    thread.join(60)
    assert isinstance(outcome[0], Erased)
    assert service.store.list(T, "sam", MemoryFilters(include_superseded=True), 100, None)[0] == []


def _run(service: Any) -> Any:
    try:
        return service.consolidate(T, "sam", now=NOW)
    except Erased as exc:
        return exc


def test_dynamodb_refuses_a_write_of_work_begun_before_the_erase(ddb: Any) -> None:
    from datetime import UTC, datetime, timedelta

    from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
    from memstack.domain.erasure import Fence
    from memstack.models import MemoryRecord

    from tests.conformance.conftest import TABLE, create_memories_table

    create_memories_table(ddb)
    store = DynamoDBMemoryStore(TABLE, ddb)
    record = MemoryRecord(tenant=T, user_id="ann", content="Ann lives in Osaka.")
    store.put([record])
    started = datetime.now(UTC) - timedelta(seconds=5)  # a job began, then the erase came
    store.erase_user(T, "ann")
    with pytest.raises(Erased):
        store.put(
            [MemoryRecord(tenant=T, user_id="ann", content="Ann lives in Osaka.")], fence=Fence.at(started)
        )
    store.put(
        [MemoryRecord(tenant=T, user_id="ann", content="Ann is back.")],
        fence=Fence.at(datetime.now(UTC) + timedelta(seconds=1)),
    )  # work begun after it is fine
    assert [r.content for r in store.list(T, "ann", MemoryFilters(), 10, None)[0]] == ["Ann is back."]


def test_an_erase_that_fails_midway_leaves_no_searchable_memory_and_its_retry_converges(
    tmp_path: Path,
) -> None:
    """Issue 23, item 1: a queue refusing its part of the erase (as IAM once did) answers 503, but the
    user's long-term memories are already gone, not searchable while their STM is; the retry finishes."""
    from memstack.errors import DependencyFailed

    settings = load_settings(data_dir=tmp_path / "data", embedder="hashing")
    service = build_service(settings)
    api = build_api(service, settings)
    turns = [{"id": "ann-1", "role": "user", "content": f"I keep a {SECRET_WORDS[0]} in the garden."}]
    assert api("POST", "/v1/memories", body={"user_id": "ann", "sync": True, "messages": turns})[0] == 200
    search = {"user_id": "ann", "query": f"what does Ann keep {SECRET_WORDS[0]}"}
    assert api("POST", "/v1/memories/search", body=search)[1]["results"]
    assert service.queue is not None
    real_erase, refusals = service.queue.erase_user, []

    def refused_once(tenant: str, user_id: str) -> int:
        if not refusals:
            refusals.append(user_id)
            raise DependencyFailed("SQS: AccessDenied on the dead-letter queue")
        return real_erase(tenant, user_id)

    service.queue.erase_user = refused_once  # type: ignore[method-assign]
    status, _ = api("DELETE", "/v1/users/ann")
    assert status == 503 and refusals == ["ann"]
    assert api("POST", "/v1/memories/search", body=search)[1]["results"] == []
    assert service.store.list(T, "ann", MemoryFilters(include_superseded=True), 100, None)[0] == []

    status, answer = api("DELETE", "/v1/users/ann")
    assert status == 200, answer
    assert api("POST", "/v1/memories/search", body=search)[1]["results"] == []
    assert api("GET", "/v1/memories", query={"user_id": "ann"})[1]["memories"] == []
    service.close()
