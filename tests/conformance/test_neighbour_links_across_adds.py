"""Neighbour links across adds, on every store backend: an agent that sends one message per add gets
the links one add of the whole session would record (``domain/adjacent.py``), and an erase takes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.adjacent import ADJACENT
from memstack.domain.ingest import Ingestor, turn_record_ids
from memstack.domain.sections import IngestConfig
from memstack.models import Message, Role

from tests.conformance.conftest import COARSE_DIM, FULL_DIM

T = "t1"
#: one add of the session, and the same session one add at a time: the links are message ids
BATCHED, ONE_BY_ONE = "u-batched", "u-one-by-one"
WHEN = datetime(2026, 3, 2, 9, tzinfo=UTC)
#: a chunked turn among them (longer than ``_CHUNK`` characters): each of its records links
_CHUNK = 500
SESSION = [
    ("m1", Role.USER, "We finally adopted a puppy from the shelter last weekend."),
    ("m2", Role.ASSISTANT, "Congratulations! What breed did you pick? " + "Tell me everything. " * 40),
    ("m3", Role.USER, "A golden retriever, we named her Biscuit."),
    ("m4", Role.ASSISTANT, "Biscuit is a lovely name for a golden."),
    ("m5", Role.USER, "She already knows how to sit."),
    ("m6", Role.ASSISTANT, "Sitting at her age is impressive."),
]


def _ingestor(store: Any, tmp_path: Path) -> Ingestor:
    stm = EmbeddedShortTermStore(Database(tmp_path / "stm.sqlite3"))
    config = IngestConfig(coarse_dim=COARSE_DIM, index_chunk_chars=_CHUNK)
    return Ingestor(store, stm, HashingEmbedder(FULL_DIM), config)


def _messages(turns: list[tuple[str, Role, str]]) -> list[Message]:
    return [
        Message(id=i, role=r, content=c, timestamp=WHEN + timedelta(minutes=n))
        for n, (i, r, c) in enumerate(turns)
    ]


def _links(store: Any, user: str, message_ids: list[str]) -> dict[str, list[Any]]:
    """Per message: what each of its records (the turn's, its chunks') records, by record id."""
    out = {}
    for m in message_ids:
        ids = turn_record_ids(store, T, user, [m])
        records = store.get_many(T, user, ids)
        out[m] = [records[i].metadata.get(ADJACENT) for i in ids if i in records]
    return out


def _indexed(store: Any, user: str, message_ids: list[str]) -> dict[str, list[str]]:
    """Per message: the text each of its records is indexed (BM25) by."""
    out = {}
    for m in message_ids:
        ids = turn_record_ids(store, T, user, [m])
        records = store.get_many(T, user, ids)
        out[m] = [records[i].indexed_text for i in ids if i in records]
    return out


def _add(
    ingestor: Ingestor,
    user: str,
    batch: list[Message],
    at: int,
    session: str | None = "s1",
    start: datetime = WHEN,
) -> None:
    # each add a second after the one before: the session's order is the order of its adds
    ingestor.add(T, user, batch, session_id=session, infer=False, now=start + timedelta(seconds=at))


def test_one_add_per_turn_links_what_one_add_of_the_session_does(store: Any, tmp_path: Path) -> None:
    ingestor = _ingestor(store, tmp_path)
    messages = _messages(SESSION)
    ids = [m.id for m in messages]
    _add(ingestor, BATCHED, messages, 0)
    batched = _links(store, BATCHED, ids)
    assert batched["m3"] == [["m2", "m4", "m1", "m5"]]
    assert len(batched["m2"]) > 1  # chunked: every record links
    for n, message in enumerate(messages):
        _add(ingestor, ONE_BY_ONE, [message], n)
    assert _links(store, ONE_BY_ONE, ids) == batched
    # and each turn is indexed with the turns before it as its context, as in one add
    assert _indexed(store, ONE_BY_ONE, ids) == _indexed(store, BATCHED, ids)
    assert "Biscuit" in _indexed(store, ONE_BY_ONE, ["m5"])["m5"][0]  # m3's words, in m5's context


def test_adds_of_several_turns_link_across_their_edges(store: Any, tmp_path: Path) -> None:
    ingestor = _ingestor(store, tmp_path)
    messages = _messages(SESSION)
    ids = [m.id for m in messages]
    _add(ingestor, BATCHED, messages, 0)
    batched = _links(store, BATCHED, ids)
    # a turn of another session, and one with none, in between: neither is a neighbour
    for n, (batch, session) in enumerate(
        [
            (messages[:3], "s1"),
            (_messages([("x1", Role.USER, "Unrelated.")]), "s2"),
            (messages[3:4], "s1"),
            (_messages([("y1", Role.USER, "No session.")]), None),
            (messages[4:], "s1"),
        ]
    ):
        _add(ingestor, ONE_BY_ONE, batch, n, session)
    assert _links(store, ONE_BY_ONE, ids) == batched
    assert _links(store, ONE_BY_ONE, ["x1", "y1"]) == {"x1": [None], "y1": [None]}


def test_an_erase_takes_the_links_and_the_next_turn_links_to_nothing_erased(
    store: Any, tmp_path: Path
) -> None:
    ingestor = _ingestor(store, tmp_path)
    messages = _messages(SESSION)
    for n, message in enumerate(messages[:3]):
        _add(ingestor, ONE_BY_ONE, [message], n)
    store.erase_user(T, ONE_BY_ONE)
    assert _links(store, ONE_BY_ONE, ["m1", "m2", "m3"]) == {"m1": [], "m2": [], "m3": []}  # no record left
    after = datetime.now(UTC)  # an add begun before the erase is refused (its fence)
    _add(ingestor, ONE_BY_ONE, messages[3:4], 1, start=after)
    _add(ingestor, ONE_BY_ONE, messages[4:5], 2, start=after)
    assert _links(store, ONE_BY_ONE, ["m4", "m5"]) == {"m4": [["m5"]], "m5": [["m4"]]}


def test_a_retried_add_links_nothing_again(store: Any, tmp_path: Path) -> None:
    ingestor = _ingestor(store, tmp_path)
    messages = _messages(SESSION)
    for n, message in enumerate(messages[:4]):
        _add(ingestor, ONE_BY_ONE, [message], n)
    ids = [m.id for m in messages[:4]]
    before = _links(store, ONE_BY_ONE, ids)
    assert before["m4"] == [["m3", "m2"]]
    _add(ingestor, ONE_BY_ONE, messages[1:2], 9)  # a late retry of m2: the session has moved on since
    assert _links(store, ONE_BY_ONE, ids) == before
