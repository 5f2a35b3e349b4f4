"""A failing add never takes back messages a concurrent duplicate accepted (issue 25).

Where the STM and the memory store share no transaction (every store with the
DynamoDB STM, or a non-embedded store with the embedded STM), an add whose turn
write fails takes back the STM entries it stored. A duplicate of that request
(the same message ids, e.g. a client retry that raced the first attempt) finds
the entries already stored and answers yes on them: the take-back must not then
remove them, or an accepted message is lost with no one left to retry it.

The interleavings are driven step by step: the first add runs in a thread that
stops right after its STM write until the test lets it go on, its store write
fails (injected at the port; each store's own write is all or nothing, which
``test_add_all_or_nothing`` proves per backend), and the duplicate runs in the
test's thread. No sleeps: each side waits on an event the other sets.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore, create_stm_table
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.domain.ingest import Ingestor, IngestResult, stm_memory_id
from memstack.domain.sections import IngestConfig
from memstack.errors import DependencyFailed
from memstack.models import Message
from moto import mock_aws

from tests.conformance.conftest import COARSE_DIM, FULL_DIM, dynamodb_client
from tests.reliability.faults import Fail, Faulty

TENANT, USER = "t1", "u1"
STM_TABLE = "memstack-stm-duplicate-race"
WAIT = 120  # seconds: generous under load; a deadlock fails instead of hanging
MESSAGES = [
    Message(id="m1", role="user", content="I moved to Tallinn last spring."),
    Message(id="m2", role="user", content="My sister Mari lives there too."),
]
IDS = [m.id for m in MESSAGES]


def _embedded_stm(tmp_path: Path) -> Iterator[Any]:
    """The embedded STM beside a store in another database: no shared transaction (e.g. PostgreSQL)."""
    yield EmbeddedShortTermStore(Database(tmp_path / "stm.sqlite3"))


def _dynamodb_stm(tmp_path: Path) -> Iterator[Any]:
    with mock_aws():  # nested inside the DynamoDB store's own mock: one moto state
        client = dynamodb_client()
        create_stm_table(client, STM_TABLE)
        yield DynamoDbShortTermStore(STM_TABLE, client=client)


@pytest.fixture(params=["embedded-stm", "dynamodb-stm"])
def stm(request: pytest.FixtureRequest, store: Any, tmp_path: Path) -> Iterator[Any]:
    yield from {"embedded-stm": _embedded_stm, "dynamodb-stm": _dynamodb_stm}[request.param](tmp_path)


class Hooked:
    """``real``, with a function run after each call of the methods named in ``after``."""

    def __init__(self, real: Any, **after: Callable[[], None]) -> None:
        self._real, self._after = real, after

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if name not in self._after:
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            result = target(*args, **kwargs)
            self._after[name]()
            return result

        return call


@dataclass
class First:
    """The first add, in its own thread: stops after its STM write until ``go``; its store write fails."""

    ingestor: Ingestor
    appended: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        try:
            self.ingestor.add(TENANT, USER, MESSAGES)
        except BaseException as exc:  # what its client is told
            self.error = exc
        finally:
            self.done.set()

    def wait_go(self) -> None:
        self.appended.set()
        assert self.go.wait(WAIT), "the test never let the first add go on"


def _ingestor(store: Any, stm: Any, queue: SqliteJobQueue) -> Ingestor:
    return Ingestor(store, stm, HashingEmbedder(dim=FULL_DIM), IngestConfig(coarse_dim=COARSE_DIM), queue)


def _first(store: Any, stm: Any, queue: SqliteJobQueue) -> First:
    first = First(_ingestor(store, stm, queue))  # hooks set below, once ``first`` exists
    first.ingestor.stm = Hooked(stm, append=first.wait_go)
    first.ingestor.store = Faulty(store, put=Fail(DependencyFailed("injected: the store is down")))
    return first


def _race(store: Any, stm: Any, queue: SqliteJobQueue, *, take_back_first: bool) -> IngestResult:
    """Run the first add and its duplicate interleaved; the duplicate's result."""
    first = _first(store, stm, queue)
    thread = threading.Thread(target=first.run, daemon=True)
    thread.start()
    assert first.appended.wait(WAIT), "the first add never stored its entries"

    def first_fails_and_takes_back() -> None:
        first.go.set()
        assert first.done.wait(WAIT), "the first add never finished"

    # The duplicate finds the entries stored and indexes their turns; then either it answers
    # and the first add fails, or the first add fails (taking back) before it answers.
    duplicate_store = Hooked(store, put=first_fails_and_takes_back) if take_back_first else store
    result = _ingestor(duplicate_store, stm, queue).add(TENANT, USER, MESSAGES)
    first.go.set()
    thread.join(WAIT)
    assert isinstance(first.error, DependencyFailed), first.error  # its client got a 503 and retries
    return result


def _accepted_and_kept(store: Any, stm: Any, queue: SqliteJobQueue) -> None:
    """Both messages are stored, owed their extraction, queued for it, and their turns indexed."""
    assert [m for m in IDS if stm.get(TENANT, USER, m) is not None] == IDS
    assert set(stm.unextracted(TENANT, USER, IDS)) == set(IDS)
    assert set(store.get_many(TENANT, USER, [stm_memory_id(TENANT, USER, m) for m in IDS])) == {
        stm_memory_id(TENANT, USER, m) for m in IDS
    }
    assert queue.pending() == 2


@pytest.mark.parametrize("take_back_first", [False, True], ids=["duplicate-answers-first", "take-back-first"])
def test_a_failing_add_never_takes_back_what_a_concurrent_duplicate_accepted(
    store: Any, stm: Any, tmp_path: Path, take_back_first: bool
) -> None:
    queue = SqliteJobQueue(Database(tmp_path / "queue.sqlite3"))
    result = _race(store, stm, queue, take_back_first=take_back_first)
    assert result.accepted == IDS  # the duplicate's client was told yes ...
    _accepted_and_kept(store, stm, queue)  # ... so nothing of it may be gone

    # The first add's client retries (it got a 503): nothing is stored or queued twice.
    retry = _ingestor(store, stm, queue).add(TENANT, USER, MESSAGES)
    assert retry.stored == []
    _accepted_and_kept(store, stm, queue)


def test_an_add_whose_take_back_fails_too_leaves_its_entries_for_the_retry_to_complete(
    store: Any, stm: Any, tmp_path: Path
) -> None:
    """Limit: the same outage fails the take-back. The client got a 503; its retry completes the add."""
    queue = SqliteJobQueue(Database(tmp_path / "queue.sqlite3"))
    failing = _ingestor(
        Faulty(store, put=Fail(DependencyFailed("injected: the store is down"))),
        Faulty(stm, withdraw=Fail(DependencyFailed("injected: the STM is down too"))),
        queue,
    )
    with pytest.raises(DependencyFailed, match="the store is down"):  # the first failure is reported
        failing.add(TENANT, USER, MESSAGES)
    # Left: the entries, owed an extraction (the outbox sweep would extract them without a retry),
    # no turn, no job.
    assert [m for m in IDS if stm.get(TENANT, USER, m) is not None] == IDS
    assert set(stm.unextracted(TENANT, USER, IDS)) == set(IDS)
    assert store.get_many(TENANT, USER, [stm_memory_id(TENANT, USER, m) for m in IDS]) == {}
    assert queue.pending() == 0

    retry = _ingestor(store, stm, queue).add(TENANT, USER, MESSAGES)
    assert retry.stored == [] and retry.queued == 2
    _accepted_and_kept(store, stm, queue)
