"""Erase on PostgreSQL: nothing of the user in any table, and final against work that was running.

The fence (domain/erasure.py) is checked three ways: a write of work begun
before the erase is refused and one begun after it is not; a write waiting on
an erase that commits is refused (it must see the marker committed while it
waited); and an erase waiting on a write that holds the user's lock deletes
what that write committed.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from memstack.adapters.postgres import writes
from memstack.adapters.postgres.records import records_json
from memstack.domain import versions
from memstack.domain.erasure import Erased, Fence, erasure_key
from memstack.models import MemoryFilters

from tests.waiting import wait_until

from .conftest import COARSE_DIM, EMB, backends_waiting_on_lock, record, service_settings

USER = "ann-erase-me"
SECRET_WORDS = ["zanzibarquux", "plovdivorama"]
EVERY_VERSION = MemoryFilters(include_superseded=True)


def _rows_naming(admin: Any, schema: str, needles: list[str]) -> dict[str, int]:
    """Rows of every table in the store's schema whose text form holds one of ``needles``."""
    tables = admin.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
    ).fetchall()
    found: dict[str, int] = {}
    for (table,) in tables:
        rows = admin.execute(f"SELECT t::text FROM {schema}.{table} t").fetchall()
        hits = sum(1 for (text,) in rows if any(n in text for n in needles))
        if hits:
            found[table] = hits
    return found


def _fill(store: Any, user: str) -> None:
    """Memories of ``user`` in every shape the store keeps: versions, a tombstone, sources, metadata."""
    secret = " and ".join(f"I keep a {w}" for w in SECRET_WORDS)
    first = record(f"{secret} at home", user=user, source_ids=["m1"], metadata={"topic": "pets"})
    other = record(f"{secret} at work", user=user, source_ids=["m2"])
    store.put([first, other])
    newer = versions.new_version(first, content=f"{secret} now", embedder=EMB, coarse_dim=COARSE_DIM)
    store.supersede("t1", user, first.id, newer)
    tomb = versions.new_version(other, content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
    store.supersede("t1", user, other.id, tomb)


def test_erase_leaves_no_row_of_the_user_in_any_table(make_store: Any, admin: Any) -> None:
    store = make_store()
    _fill(store, USER)
    _fill(store, "bob")
    store.analyze()
    before = _rows_naming(admin, store.schema, [USER, *SECRET_WORDS])
    assert {"memories", "memory_sources", "text_stats"} <= set(before)  # the scan can see the user

    assert store.erase_user("t1", USER) == {"memories": 4}
    assert _rows_naming(admin, store.schema, [USER]) == {}
    # The secret words are only in bob's rows now (he said the same); his data is intact.
    assert store.list("t1", USER, EVERY_VERSION, 10) == ([], None)
    assert len(store.list("t1", "bob", EVERY_VERSION, 10)[0]) == 3  # a listing shows no tombstone
    assert store.bm25_search("t1", "bob", SECRET_WORDS[0], 10, MemoryFilters())
    stats = admin.execute(f"SELECT user_id, docs FROM {store.schema}.text_stats").fetchall()
    assert stats == [("bob", 1)]
    # The erasure marker holds a hash of the user, never the id.
    markers = admin.execute(f"SELECT key FROM {store.schema}.erasures").fetchall()
    assert markers == [(erasure_key("t1", USER),)]


def test_planner_statistics_forget_the_user_at_the_next_analyze(make_store: Any, admin: Any) -> None:
    """What docs/backends.md says stays behind: pg_statistic's sampled values, until ANALYZE runs again."""
    store = make_store()
    _fill(store, USER)
    _fill(store, "bob")  # ANALYZE of a table with no row left keeps the old statistics
    store.analyze()

    def sampled() -> bool:
        rows = admin.execute(
            "SELECT most_common_vals::text FROM pg_stats WHERE schemaname = %s AND attname = 'user_id'",
            (store.schema,),
        ).fetchall()
        return any(text and USER in text for (text,) in rows)

    assert sampled()
    store.erase_user("t1", USER)
    store.analyze()  # what autovacuum's analyze does later on its own
    assert not sampled()


def test_a_write_of_work_begun_before_the_erase_is_refused(make_store: Any) -> None:
    store = make_store()
    kept = record("Ann lives in Osaka.", user=USER)
    store.put([kept])
    started = datetime.now(UTC) - timedelta(seconds=5)  # a job began, then the erase came
    store.erase_user("t1", USER)
    with pytest.raises(Erased):
        store.put(
            [record("Ann lives in Osaka.", user=USER), record("Bob too.", user="bob")],
            fence=Fence.at(started),
        )
    with pytest.raises(Erased):
        store.supersede(
            "t1", USER, kept.id, record("Ann lives in Kyoto.", user=USER), fence=Fence.at(started)
        )
    assert store.list("t1", "bob", EVERY_VERSION, 10) == ([], None)  # the refused put was all or nothing
    store.put(
        [record("Ann is back.", user=USER)], fence=Fence.at(datetime.now(UTC) + timedelta(seconds=1))
    )  # work begun after the erase is fine
    store.put([record("An import carries no start.", user=USER)])  # nor is undeclared work fenced
    listed = store.list("t1", USER, EVERY_VERSION, 10)[0]
    assert sorted(r.content for r in listed) == ["An import carries no start.", "Ann is back."]
    assert store.executor.query(f"SELECT docs FROM {store.schema}.text_stats")[0]["docs"] == 2


def test_a_write_waiting_on_an_erase_that_commits_is_refused(make_store: Any, admin: Any) -> None:
    """The write's own statement began before the erase committed: the fence must still see it."""
    store = make_store()
    store.put([record("Ann lives in Osaka.", user=USER)])
    started = datetime.now(UTC)
    key = erasure_key("t1", USER)
    admin.execute("BEGIN")  # an erase, half done: lock taken, marker and deletes not yet committed
    admin.execute(writes.erase_lock_sql(store.schema).replace(":key", "%(key)s"), {"key": key})
    outcome: list[BaseException | None] = []

    def job() -> None:
        try:
            store.put([record("Ann moved to Kyoto.", user=USER)], fence=Fence.at(started))
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=job)
    thread.start()
    wait_until(lambda: len(backends_waiting_on_lock(admin)) == 1, what="the write to wait on the erase lock")
    now = started.timestamp() + 1
    admin.execute(
        f"INSERT INTO {store.schema}.erasures (key, erased_at, expires_at) VALUES (%s, %s, %s)",
        (key, now, now + 60),
    )
    admin.execute(f"DELETE FROM {store.schema}.memories WHERE user_id = %s", (USER,))
    admin.execute("COMMIT")
    thread.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], Erased)
    assert store.list("t1", USER, EVERY_VERSION, 10) == ([], None)


def test_an_erase_waiting_on_a_running_write_deletes_what_it_wrote(make_store: Any, admin: Any) -> None:
    store, eraser = make_store(), make_store(migrate_on_start=False)
    started = datetime.now(UTC)
    erased: list[dict[str, int]] = []
    with store.executor.transaction() as tx:
        # A fenced write in a transaction still open (as a Data API batch of statements would be).
        written = [record("Ann lives in Osaka.", user=USER)]
        fence = store._fence(written, Fence.at(started))
        rows = tx.query(writes.insert_sql(store.schema), {"records": records_json(written), **fence})
        assert not rows[0]["refused"]
        thread = threading.Thread(target=lambda: erased.append(eraser.erase_user("t1", USER)))
        thread.start()
        wait_until(lambda: len(backends_waiting_on_lock(admin)) == 1, what="the erase to wait on the write")
    thread.join(60)
    assert erased == [{"memories": 1}]
    assert store.list("t1", USER, EVERY_VERSION, 10) == ([], None)


def test_an_extraction_job_running_when_the_erase_came_writes_nothing(
    tmp_path: Any, postgres_server: Any, postgres_schema: str
) -> None:
    """The product's path on postgres: the job had read the message and was waiting for the model."""
    from memstack.factory import build_service
    from memstack.models import Message

    settings = service_settings(tmp_path / "data", postgres_server, postgres_schema)
    service = build_service(settings)
    handler = service.job_handlers["extract"]
    real = handler.extractor
    inside, erased = threading.Event(), threading.Event()

    class SlowModel:
        name = "slow"

        def extract(
            self, message: Any, context: list[Any], neighbours: list[Any], guidance: Any = None
        ) -> list[Any]:
            inside.set()
            assert erased.wait(60)
            return real.extract(message, context, neighbours)

    handler.extractor = SlowModel()
    service.add("t1", USER, [Message(id="m1", content="I moved to Osaka.")])
    assert service.queue is not None
    thread = threading.Thread(target=service.queue.run_ready)
    thread.start()
    assert inside.wait(60)
    service.erase_user("t1", USER)
    erased.set()
    thread.join(60)
    handler.extractor = real
    assert service.queue.drain(timeout=60)  # the refused job's retry finds nothing to do
    assert service.store.list("t1", USER, EVERY_VERSION, 100, None) == ([], None)
    assert service.queue.dead_letters() == []
    service.close()
