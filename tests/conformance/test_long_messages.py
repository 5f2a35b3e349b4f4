"""A long message on every store backend: indexed in chunks that cite it, marked as one turn."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.chunks import split_chunks
from memstack.domain.ingest import Ingestor, stm_memory_id, turn_record_ids
from memstack.domain.sections import IngestConfig
from memstack.models import MemoryFilters, Message, Tier

from tests.conformance.conftest import COARSE_DIM, FULL_DIM

T, U = "t1", "u1"
WHEN = datetime(2026, 3, 2, 9, tzinfo=UTC)
#: ~40,000 characters in paragraphs, each naming its own marker word
LONG = "\n\n".join(
    f"Paragraph {i} of the pasted build log: step marker{i} compiled module{i} " + "ok " * 190
    for i in range(60)
)


def _ingest(store: Any, tmp_path: Path) -> tuple[Ingestor, EmbeddedShortTermStore]:
    stm = EmbeddedShortTermStore(Database(tmp_path / "stm.sqlite3"))
    ingestor = Ingestor(store, stm, HashingEmbedder(FULL_DIM), IngestConfig(coarse_dim=COARSE_DIM))
    messages = [
        Message(id="log-1", content=LONG, timestamp=WHEN),
        Message(id="m2", content="The build after that log went green.", timestamp=WHEN),
    ]
    ingestor.add(T, U, messages, infer=False)  # received now: the STM entry is not expired
    return ingestor, stm


def test_a_long_turn_is_indexed_in_chunks_that_cite_it(store: Any, tmp_path: Path) -> None:
    _, stm = _ingest(store, tmp_path)
    limit = IngestConfig().chunk_chars
    chunks = sorted(store.find_by_source(T, U, "log-1"), key=lambda r: r.metadata["chunk"])
    assert len(chunks) == len(split_chunks(LONG, limit)) > 1
    assert "".join(r.content for r in chunks) == LONG  # nothing lost, nothing repeated
    assert chunks[0].id == stm_memory_id(T, U, "log-1")
    assert all(r.tier == Tier.STM and r.source_ids == ["log-1"] for r in chunks)
    assert all(len(r.content) <= limit and r.metadata["chunks"] == len(chunks) for r in chunks)
    # A word of the last paragraph finds the chunk that holds it, and that chunk cites the turn.
    [hit] = store.bm25_search(T, U, "marker59", 1, MemoryFilters())
    found = store.get(T, U, hit.id)
    assert found is not None and "marker59" in found.content and found.source_ids == ["log-1"]
    # The next turn carries the long one as context by its first chunk only.
    after = store.get(T, U, stm_memory_id(T, U, "m2"))
    assert after is not None and len(after.indexed_text) < limit + 200
    assert "marker59" not in after.indexed_text
    # The short-term store keeps the message whole.
    entry = stm.get(T, U, "log-1")
    assert entry is not None and entry.message.content == LONG


def test_a_long_turn_sent_again_stores_nothing_twice(store: Any, tmp_path: Path) -> None:
    ingestor, _ = _ingest(store, tmp_path)
    before = len(store.find_by_source(T, U, "log-1"))
    result = ingestor.add(T, U, [Message(id="log-1", content=LONG, timestamp=WHEN)], infer=False)
    assert result.stored == [] and len(store.find_by_source(T, U, "log-1")) == before


def test_every_chunk_of_a_turn_is_marked_with_it(store: Any, tmp_path: Path) -> None:
    _ingest(store, tmp_path)
    ids = turn_record_ids(store, T, U, ["log-1", "m2"])
    chunks = {r.id for r in store.find_by_source(T, U, "log-1")}
    assert set(ids) == chunks | {stm_memory_id(T, U, "m2")}
    store.mark(T, U, ids, consolidated=True)
    marked = store.get_many(T, U, ids)
    assert len(marked) == len(ids) and all(r.metadata.get("consolidated") for r in marked.values())
