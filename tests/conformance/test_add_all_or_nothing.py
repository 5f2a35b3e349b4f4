"""An add that fails leaves nothing, on every backend (issue 25, item 2).

The embedded backend writes an add's STM entries and its turn records in one
SQLite transaction. The AWS backends have no transaction spanning the STM
table and the memory store, so there the add takes back what it wrote: the
store's own write is all or nothing, and the STM entries are withdrawn when
the store write fails. Each case makes the memory store's write fail for real
at its own level (an SQLite error, a DynamoDB transaction answering 500
(moto), a PostgreSQL statement cancelled by the server, an OpenSearch bulk
that created one document and rejected the next) and then checks that no STM
entry, no pending extraction, no queued job and no memory of the request is
left, and that the client's retry stores it all, once.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore, create_stm_table
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.adapters.postgres.executor import StoreUnavailable
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.domain.ingest import Ingestor, stm_memory_id
from memstack.domain.sections import IngestConfig
from memstack.errors import DependencyFailed
from memstack.models import Message
from moto import mock_aws

from tests.adapters import opensearch_recorded as rec
from tests.adapters.opensearch_fake import Recorder, recording_client
from tests.conformance.conftest import COARSE_DIM, FULL_DIM, TABLE, create_memories_table, dynamodb_client
from tests.reliability.faults import Fail, Faulty, server_error

TENANT, USER = "t1", "u1"
STM_TABLE = "memstack-stm-all-or-nothing"
NOW = datetime.now(UTC).replace(microsecond=0)  # STM entries expire: a fixed past date would read as gone


@dataclass
class Rig:
    ingestor: Ingestor
    stm: Any
    queue: SqliteJobQueue
    #: the memory store's next write fails (for real, at the backend's own level)
    break_store: Callable[[], None]
    #: the memory store works again
    mend_store: Callable[[], None]
    #: the ids of the turn records the store holds for ``message_ids``
    turns_stored: Callable[[list[str]], set[str]]
    #: what the failed add raises (the API answers it: 503 for a dependency, 500 otherwise)
    error: type[BaseException]


def _ingestor(store: Any, stm: Any, queue: SqliteJobQueue, unit: Any = None) -> Ingestor:
    config = IngestConfig(coarse_dim=COARSE_DIM)
    return Ingestor(store, stm, HashingEmbedder(dim=FULL_DIM), config, queue, unit=unit)


def _turns(store: Any) -> Callable[[list[str]], set[str]]:
    def stored(message_ids: list[str]) -> set[str]:
        return set(store.get_many(TENANT, USER, [stm_memory_id(TENANT, USER, m) for m in message_ids]))

    return stored


def _embedded(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    db = Database(tmp_path / "memstack.sqlite3")
    store, stm = EmbeddedMemoryStore(db), EmbeddedShortTermStore(db)
    queue = SqliteJobQueue(db)

    # A real SQLite failure inside the add's transaction: inserting into memories fails.
    def refuse() -> None:
        raise RuntimeError("injected")

    db.connection().create_function("refuse", 0, refuse)
    with db.write() as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON memories BEGIN SELECT refuse(); END")

    def mend() -> None:
        with db.write() as conn:
            conn.execute("DROP TRIGGER refuse")

    rig = Rig(
        _ingestor(store, stm, queue, unit=db.write),
        stm,
        queue,
        lambda: None,
        mend,
        _turns(store),
        sqlite3.Error,
    )
    yield rig
    store.close()


def _dynamodb_stm(client: Any) -> DynamoDbShortTermStore:
    create_stm_table(client, STM_TABLE)
    return DynamoDbShortTermStore(STM_TABLE, client=client)


def _dynamodb(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    with mock_aws():
        client = dynamodb_client()
        create_memories_table(client)
        stm = _dynamodb_stm(client)
        # The store's transactions answer 500; the STM's (the same service) still work.
        faulty = Faulty(client, transact_write_items=Fail(server_error("TransactWriteItems"), times=10**6))
        plan = faulty._plan

        def mend() -> None:
            plan.clear()

        store = DynamoDBMemoryStore(TABLE, faulty)
        queue = SqliteJobQueue(Database(tmp_path / "queue.sqlite3"))
        yield Rig(
            _ingestor(store, stm, queue), stm, queue, lambda: None, mend, _turns(store), DependencyFailed
        )


def _postgres(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    from memstack.adapters.postgres.connect import SESSION_SETTINGS
    from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor
    from memstack.adapters.postgres.store import PostgresMemoryStore

    server = request.getfixturevalue("postgres_server")
    schema = request.getfixturevalue("postgres_schema")  # its own: the trigger below must not leak
    executor = PsycopgExecutor(server.dsn, max_size=2, session_settings=SESSION_SETTINGS)
    store = PostgresMemoryStore(executor, schema=schema, coarse_dim=COARSE_DIM)
    store.get_many(TENANT, USER, ["x"])  # the schema exists from here on
    # The server cancels the insert (SQLSTATE 57014, as a statement timeout does).
    with psycopg.connect(server.dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '57014'; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON {schema}.memories "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}.refuse()"
        )

    def mend() -> None:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER refuse ON {schema}.memories")

    with mock_aws():
        stm = _dynamodb_stm(dynamodb_client())
        queue = SqliteJobQueue(Database(tmp_path / "queue.sqlite3"))
        yield Rig(
            _ingestor(store, stm, queue), stm, queue, lambda: None, mend, _turns(store), StoreUnavailable
        )
    store.close()


def _opensearch(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """OpenSearch at the request level: the real client and store, answers recorded per request."""
    from memstack.adapters.opensearch import mapping
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore

    recorder = Recorder()
    store = OpenSearchMemoryStore.managed(
        recording_client(recorder),
        alias="memstack",
        embedding_dim=FULL_DIM,
        coarse_dim=COARSE_DIM,
        auto_create=False,
    )
    #: per bulk request, the creates the cluster answered with an error (they did not land)
    rejected: list[set[str]] = []

    def did(message_id: str) -> str:
        return mapping.doc_id(TENANT, USER, stm_memory_id(TENANT, USER, message_id))

    def no_marker() -> None:
        recorder.reply(404, rec.error(404, "index_not_found_exception", "no such index"))

    def turns_none_yet() -> None:
        recorder.reply(200, {"docs": [rec.not_found(did("m1")), rec.not_found(did("m2"))]})

    def break_store() -> None:
        # The add reads the turns (none yet) and the erasure marker (none); then its bulk creates
        # the first document and the cluster fails the second; the store deletes the first.
        turns_none_yet()
        no_marker()
        recorder.reply(
            200,
            rec.bulk(
                rec.bulk_item("create", did("m1"), 201),
                rec.bulk_item("create", did("m2"), 500, error="illegal_state_exception"),
            ),
        )
        recorder.reply(200, rec.bulk(rec.bulk_item("delete", did("m1"), 200)))
        rejected.extend([{did("m2")}, set()])

    def mend() -> None:
        # The retry: nothing there, no erasure, both created, no erasure since (the fence's second read).
        turns_none_yet()
        no_marker()
        recorder.reply(
            200, rec.bulk(rec.bulk_item("create", did("m1"), 201), rec.bulk_item("create", did("m2"), 201))
        )
        no_marker()
        rejected.append(set())

    def turns_stored(message_ids: list[str]) -> set[str]:
        """What the requests sent left on the cluster: each landed create, minus each delete."""
        held: dict[str, str] = {}
        bulks = [r for r in recorder.requests if r.path == "/_bulk"]
        for request, refused in zip(bulks, rejected, strict=True):
            lines = request.lines
            for i, line in enumerate(lines):
                if "create" in line and line["create"]["_id"] not in refused:
                    held[line["create"]["_id"]] = lines[i + 1]["memory_id"]
                elif "delete" in line:
                    held.pop(line["delete"]["_id"], None)
        return {held[did(m)] for m in message_ids if did(m) in held}

    with mock_aws():
        stm = _dynamodb_stm(dynamodb_client())
        queue = SqliteJobQueue(Database(tmp_path / "queue.sqlite3"))
        yield Rig(_ingestor(store, stm, queue), stm, queue, break_store, mend, turns_stored, DependencyFailed)
    assert not recorder.answers, "every recorded answer was asked for"


RIGS = {"embedded": _embedded, "dynamodb": _dynamodb, "postgres": _postgres, "opensearch": _opensearch}


@pytest.fixture(params=list(RIGS))
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    yield from RIGS[request.param](tmp_path, request)


MESSAGES = [
    Message(id="m1", role="user", content="I moved to Tallinn last spring.", timestamp=NOW),
    Message(id="m2", role="user", content="My sister Mari lives there too.", timestamp=NOW),
]


def _left(rig: Rig) -> dict[str, Any]:
    ids = [m.id for m in MESSAGES]
    return {
        "stm": [m for m in ids if rig.stm.get(TENANT, USER, m) is not None],
        "pending": rig.stm.unextracted(TENANT, USER, ids),
        "stale": rig.stm.stale_pending(datetime(2000, 1, 1, tzinfo=UTC), NOW + timedelta(hours=1), NOW, 100),
        "jobs": rig.queue.pending(),
        "turns": rig.turns_stored(ids),
    }


def test_an_add_whose_memory_store_write_fails_leaves_nothing_and_its_retry_stores_it_once(rig: Rig) -> None:
    before = _left(rig)
    rig.break_store()
    with pytest.raises(rig.error):
        rig.ingestor.add(TENANT, USER, MESSAGES, now=NOW)
    assert _left(rig) == before == {"stm": [], "pending": {}, "stale": [], "jobs": 0, "turns": set()}

    rig.mend_store()
    result = rig.ingestor.add(TENANT, USER, MESSAGES, now=NOW)
    assert result.stored == ["m1", "m2"]  # nothing of the failed add was in the way
    assert result.queued == 2
    after = _left(rig)
    assert after["stm"] == ["m1", "m2"]
    assert set(after["pending"]) == {"m1", "m2"}
    assert after["turns"] == {stm_memory_id(TENANT, USER, m.id) for m in MESSAGES}


def test_a_dynamodb_stm_write_spanning_transactions_is_taken_back_when_a_later_one_fails(
    tmp_path: Path,
) -> None:
    """60 messages are two STM transactions: the second failing takes back the first's entries."""
    with mock_aws():
        client = dynamodb_client()
        create_memories_table(client)
        create_stm_table(client, STM_TABLE)
        faulty = Faulty(client, transact_write_items=Fail(server_error("TransactWriteItems"), on_call=2))
        stm = DynamoDbShortTermStore(STM_TABLE, client=faulty)
        store = DynamoDBMemoryStore(TABLE, client)
        queue = SqliteJobQueue(Database(tmp_path / "queue.sqlite3"))
        ingestor = _ingestor(store, stm, queue)
        messages = [
            Message(id=f"n{i}", role="user", content=f"Fact number {i}.", timestamp=NOW) for i in range(60)
        ]
        with pytest.raises(DependencyFailed):
            ingestor.add(TENANT, USER, messages, now=NOW)
        assert faulty.injected["transact_write_items"] == 1
        items = client.scan(TableName=STM_TABLE)["Items"]
        assert items == []  # no entry, no guard: not even the first transaction's
        assert store.get_many(TENANT, USER, [stm_memory_id(TENANT, USER, m.id) for m in messages]) == {}
        assert queue.pending() == 0

        result = ingestor.add(TENANT, USER, messages, now=NOW)
        assert len(result.stored) == 60 and result.queued == 60
        assert len(client.scan(TableName=STM_TABLE)["Items"]) == 120  # an entry and a guard each


def test_a_withdrawn_long_message_leaves_none_of_its_text_parts(tmp_path: Path) -> None:
    """A message over one DynamoDB item is stored in parts; taking the add back takes the parts too."""
    with mock_aws():
        client = dynamodb_client()
        create_memories_table(client)
        create_stm_table(client, STM_TABLE)
        stm = DynamoDbShortTermStore(STM_TABLE, client=client)
        faulty = Faulty(client, transact_write_items=Fail(server_error("TransactWriteItems"), times=10**6))
        store = DynamoDBMemoryStore(TABLE, faulty)
        ingestor = _ingestor(store, stm, SqliteJobQueue(Database(tmp_path / "queue.sqlite3")))
        long = Message(id="long", role="user", content="I moved to Tallinn. " * 40_000, timestamp=NOW)
        with pytest.raises(DependencyFailed):
            ingestor.add(TENANT, USER, [long], now=NOW)
        assert client.scan(TableName=STM_TABLE)["Items"] == []  # no entry, guard or part
