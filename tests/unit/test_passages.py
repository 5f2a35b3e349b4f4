"""A long reply's passages through the service: found as the turn, deleted with it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstack.domain.chunks import is_passage_id
from memstack.domain.ingest import stm_memory_id
from memstack.domain.retrieval.types import SearchRequest
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message, Role
from memstack.service import MemoryService
from memstack.settings import load_settings

WHEN = datetime(2026, 3, 2, 9, tzinfo=UTC)
#: a reply whose last section, far past what an embedder reads, is the only one about backups
REPLY = "\n\n".join(
    [f"Part {i}: the deployment checklist covers step {i} of the rollout. " * 12 for i in range(6)]
    + ["Finally, nightly snapshots of the postgres volume go to cold storage for ninety days."]
)


def _service(tmp_path: Path, **settings: Any) -> MemoryService:
    return build_service(load_settings(data_dir=tmp_path / "data", embedder="hashing", **settings))


def _add(service: MemoryService) -> None:
    messages = [
        Message(id="q", role=Role.USER, content="What goes into our release process?", timestamp=WHEN),
        Message(id="r", role=Role.ASSISTANT, content=REPLY, timestamp=WHEN),
        Message(id="x", role=Role.USER, content="Thanks, I will read it later.", timestamp=WHEN),
    ]
    service.add("t1", "u1", messages, infer=False)


def test_a_search_finds_the_reply_once_by_its_last_passage(tmp_path: Path) -> None:
    service = _service(tmp_path, index_passage_chars=600)
    try:
        _add(service)
        result = service.search(
            SearchRequest(tenant="t1", user_id="u1", query="snapshots of the postgres volume", top_k=5)
        )
        ids = [h.record.id for h in result.hits]
        assert ids[0] == stm_memory_id("t1", "u1", "r") and ids.count(ids[0]) == 1
        assert not any(map(is_passage_id, ids))
        assert result.hits[0].record.content == REPLY  # the whole turn, not the passage
    finally:
        service.close()


def test_deleting_a_turn_deletes_its_passages(tmp_path: Path) -> None:
    service = _service(tmp_path, index_passage_chars=600)
    try:
        _add(service)
        turn = stm_memory_id("t1", "u1", "r")
        assert len(service.store.find_by_source("t1", "u1", "r")) > 2
        service.delete("t1", "u1", turn)
        live = [r for r in service.store.find_by_source("t1", "u1", "r") if r.is_current and not r.deleted]
        assert live == []
        result = service.search(
            SearchRequest(tenant="t1", user_id="u1", query="snapshots of the postgres volume", top_k=5)
        )
        assert all(h.record.source_ids != ["r"] for h in result.hits)
    finally:
        service.close()


def test_without_the_setting_a_reply_is_one_record(tmp_path: Path) -> None:
    service = _service(tmp_path, index_passage_chars=0)
    try:
        _add(service)
        records = service.store.find_by_source("t1", "u1", "r")
        assert [r.id for r in records] == [stm_memory_id("t1", "u1", "r")]
    finally:
        service.close()


def test_passages_change_no_bm25_score(tmp_path: Path) -> None:
    """A passage holds no words: the embedded store's BM25 collection (its document count and mean
    length) leaves it out, so the user's turns score as they would without passages."""
    scores = []
    for chars in (0, 600):
        service = _service(tmp_path / str(chars), index_passage_chars=chars)
        try:
            _add(service)
            hits = service.store.bm25_search("t1", "u1", "release process", 5, MemoryFilters())
            scores.append([(h.id, h.score) for h in hits])
        finally:
            service.close()
    assert scores[0] and scores[0] == scores[1]
