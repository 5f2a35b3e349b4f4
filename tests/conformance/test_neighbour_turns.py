"""Neighbour turns on every store backend: ingest links each turn to the turns around it in its add,
and search offers the turns around its first hits as candidates, within the search's filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.adjacent import ADJACENT
from memstack.domain.ingest import Ingestor, stm_memory_id
from memstack.domain.retrieval.columns import NEIGHBOUR_RANK
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.domain.sections import IngestConfig
from memstack.models import MemoryFilters, Message, Role

from tests.conformance.conftest import COARSE_DIM, FULL_DIM

T, U = "t1", "u1"
WHEN = datetime(2026, 3, 2, 9, tzinfo=UTC)
QUERY = "which puppy did we adopt from the shelter"
#: the question's answer is the turn after the one that names the puppy: no word of the question in it
CHAT = [
    ("a1", Role.USER, "We finally adopted a puppy from the shelter last weekend."),
    ("a2", Role.ASSISTANT, "Congratulations! What breed did you pick?"),
    ("a3", Role.USER, "A golden retriever, we named her Biscuit."),
    ("a4", Role.ASSISTANT, "Biscuit is a lovely name for a golden."),
]
#: another add: the shelter is mentioned, but these turns are no neighbours of the chat's
OTHER = [
    ("b1", Role.USER, "The shelter asked for volunteers on Saturdays."),
    ("b2", Role.USER, "My tax forms are due in April."),
    ("b3", Role.USER, "The accountant will file the tax forms."),
    ("b4", Role.USER, "I repainted the kitchen cabinets."),
]


def _ingest(store: Any, tmp_path: Path) -> None:
    stm = EmbeddedShortTermStore(Database(tmp_path / "stm.sqlite3"))
    ingestor = Ingestor(store, stm, HashingEmbedder(FULL_DIM), IngestConfig(coarse_dim=COARSE_DIM))
    for batch, session in ((CHAT, "s1"), (OTHER, "s2")):
        messages = [
            Message(id=i, role=role, content=text, timestamp=WHEN + timedelta(minutes=n))
            for n, (i, role, text) in enumerate(batch)
        ]
        ingestor.add(T, U, messages, session_id=session, infer=False)


def _search(store: Any, weight: float, filters: MemoryFilters | None = None) -> SearchResult:
    config = RetrievalConfig(coarse_dim=COARSE_DIM, weight_neighbours=weight, neighbour_head=1)
    req = SearchRequest(
        tenant=T, user_id=U, query=QUERY, top_k=8, filters=filters or MemoryFilters(), explain=True
    )
    return Retriever(store, HashingEmbedder(FULL_DIM), config).search(req)


def _turn(message_id: str) -> str:
    return stm_memory_id(T, U, message_id)


def test_each_turn_records_the_turns_around_it_in_its_add(store: Any, tmp_path: Path) -> None:
    _ingest(store, tmp_path)
    records = store.get_many(T, U, [_turn(i) for i, _, _ in CHAT + OTHER])
    # nearest first, the one before ahead of the one after; never a turn of another add
    assert records[_turn("a1")].metadata[ADJACENT] == ["a2", "a3"]
    assert records[_turn("a2")].metadata[ADJACENT] == ["a1", "a3", "a4"]
    assert records[_turn("a3")].metadata[ADJACENT] == ["a2", "a4", "a1"]
    assert records[_turn("b1")].metadata[ADJACENT] == ["b2", "b3"]


def test_the_turns_around_the_first_hit_are_fused_as_a_ranking_of_their_own(
    store: Any, tmp_path: Path
) -> None:
    _ingest(store, tmp_path)
    on, off = _search(store, 0.2), _search(store, 0.0)
    first = on.hits[0].record.source_ids
    assert first == ["a1"] == off.hits[0].record.source_ids  # the turn naming the puppy and the shelter
    # The head (one turn here) gives its two turns on each side, ranked by their own cosine.
    assert "neighbour turns: 2 candidates" in on.stage_status["bm25"]
    ranked = {h.record.source_ids[0]: h.stages.get(NEIGHBOUR_RANK) for h in on.hits}
    assert sorted(r for r in ranked.values() if r is not None) == [1.0, 2.0]
    assert ranked["a2"] is not None and ranked["a3"] is not None and ranked["b1"] is None
    # Off, no such ranking: the answer (a3, no word of the question) ranks below the other add's turns
    # that share one; on, it rises above those.
    assert "neighbour" not in off.stage_status["bm25"]
    assert all(NEIGHBOUR_RANK not in h.stages for h in off.hits)
    place = {
        name: [h.record.source_ids[0] for h in r.hits].index("a3") for name, r in (("on", on), ("off", off))
    }
    assert place["on"] < place["off"]


def test_a_neighbour_the_filters_leave_out_is_never_a_candidate(store: Any, tmp_path: Path) -> None:
    _ingest(store, tmp_path)
    # a3 was said two minutes after a1: a search of the first two minutes never shows it
    early = MemoryFilters(before=WHEN + timedelta(minutes=2))
    result = _search(store, 0.2, early)
    assert "neighbour turns: 1 candidates" in result.stage_status["bm25"]
    assert "a3" not in {s for h in result.hits for s in h.record.source_ids}
