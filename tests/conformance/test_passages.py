"""A long reply's passages on every store backend: vector-only records that give a hit to their turn."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.chunks import is_passage_id, passage_id, split_chunks
from memstack.domain.ingest import Ingestor, stm_memory_id
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.stages.vector import vector_search
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.sections import IngestConfig
from memstack.domain.transfer import export_lines, import_lines
from memstack.models import MemoryFilters, Message, Role, Tier

from tests.conformance.conftest import COARSE_DIM, FULL_DIM

T, U = "t1", "u1"
WHEN = datetime(2026, 3, 2, 9, tzinfo=UTC)
LIMIT = 1000
#: ~4,800 characters in paragraphs, each about its own thing
TOPICS = ["kafka partitions", "grafana dashboards", "terraform modules", "redis eviction", "nginx caching"]
REPLY = "\n\n".join(
    f"Section {i}: about {topic}, the {topic} settings matter. " + f"{topic.split()[0]} tuning notes " * 45
    for i, topic in enumerate(TOPICS)
)
QUESTION = "How should I set up my build pipeline? It has a few stages and takes ages."


def _ingest(store: Any, tmp_path: Path, roles: str = "assistant") -> Ingestor:
    stm = EmbeddedShortTermStore(Database(tmp_path / "stm.sqlite3"))
    config = IngestConfig(coarse_dim=COARSE_DIM, index_passage_chars=LIMIT, index_passage_roles=roles)
    ingestor = Ingestor(store, stm, HashingEmbedder(FULL_DIM), config)
    messages = [
        Message(id="q1", role=Role.USER, content=QUESTION + " " + "More detail. " * 100, timestamp=WHEN),
        Message(id="r1", role=Role.ASSISTANT, content=REPLY, timestamp=WHEN),
    ]
    ingestor.add(T, U, messages, session_id="s1", infer=False)
    return ingestor


def test_a_long_reply_gets_vector_only_passages_that_cite_it(store: Any, tmp_path: Path) -> None:
    _ingest(store, tmp_path)
    pieces = split_chunks(REPLY, LIMIT)
    assert len(pieces) > 2
    owner_id = stm_memory_id(T, U, "r1")
    records = {r.id: r for r in store.find_by_source(T, U, "r1")}
    assert set(records) == {owner_id, *(passage_id(owner_id, i) for i in range(1, len(pieces)))}
    owner = records.pop(owner_id)
    assert owner.content == REPLY and owner.metadata["passages"] == len(pieces)  # the turn stays whole
    for i, piece in enumerate(pieces[1:], start=1):
        passage = records[passage_id(owner_id, i)]
        assert passage.content == piece and passage.metadata["passage"] == i
        assert passage.tier == Tier.STM and passage.session_id == "s1" and passage.event_time == WHEN
        assert passage.indexed_text == ""  # no words in BM25: the turn's own record holds them
    vectors = store.embeddings(T, U, [owner_id, *records])
    assert len(vectors) == len(pieces)  # every part of the reply is embedded
    # The user's long question gets none (passages are for replies by default).
    assert [r.id for r in store.find_by_source(T, U, "q1")] == [stm_memory_id(T, U, "q1")]


def test_every_turn_gets_passages_when_asked(store: Any, tmp_path: Path) -> None:
    _ingest(store, tmp_path, roles="all")
    assert len(store.find_by_source(T, U, "q1")) == len(
        split_chunks(QUESTION + " " + "More detail. " * 100, LIMIT)
    )


def test_a_hit_on_a_passage_is_its_turn_once(store: Any, tmp_path: Path) -> None:
    _ingest(store, tmp_path)
    owner_id = stm_memory_id(T, U, "r1")
    last = split_chunks(REPLY, LIMIT)[-1]
    query = HashingEmbedder(FULL_DIM).embed([last])[0]
    # Both paths: the exact search over every vector, and the coarse candidates rescored.
    for config in (
        RetrievalConfig(coarse_dim=COARSE_DIM),
        RetrievalConfig(coarse_dim=COARSE_DIM, exact_vector_below=0),
    ):
        req = SearchRequest(tenant=T, user_id=U, query="nginx caching")
        ranking, _ = vector_search(store, req, MemoryFilters(), query, config)
        ids = [h.id for h in ranking]
        assert ids[0] == owner_id and ids.count(owner_id) == 1
        assert not any(map(is_passage_id, ids))
        # at the passage's cosine: the last passage is the query itself
        assert ranking[0].score > 0.99


def test_a_copy_for_another_user_keeps_each_passage_with_its_turn(store: Any, tmp_path: Path) -> None:
    _ingest(store, tmp_path)
    emb = HashingEmbedder(FULL_DIM)
    report = import_lines(store, list(export_lines(store, T, U, emb)), emb, COARSE_DIM, user_id="u2")
    assert report.skipped_existing == 0
    owner = stm_memory_id(T, "u2", "r1")
    copies = {r.id for r in store.find_by_source(T, "u2", "r1")}
    pieces = len(split_chunks(REPLY, LIMIT))
    assert copies == {owner, *(passage_id(owner, i) for i in range(1, pieces))}
