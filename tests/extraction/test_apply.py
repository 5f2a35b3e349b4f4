"""apply_operations: versioned writes, idempotent on source ids, no duplicates."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from memstack.domain import versions
from memstack.domain.extraction.apply import apply_operations
from memstack.models import Category, Kind, MemoryFilters, Scope, Tier
from memstack.ports.llm import ExtractionOp
from memstack.service import MemoryService

T, U = "t1", "u1"
NOW = datetime(2026, 1, 5, 12, tzinfo=UTC)


def apply(
    service: MemoryService, ops: list[ExtractionOp], session: str | None = None, scope: Scope = Scope.USER
):
    return apply_operations(
        service.store,
        service.embedder,
        service.settings.embedding.coarse_dim,
        T,
        U,
        ops,
        session_id=session,
        scope=scope,
        now=NOW,
    )


def add(content: str, source: str = "m1", **kw: object) -> ExtractionOp:
    return ExtractionOp(op="ADD", content=content, source_ids=[source], **kw)  # type: ignore[arg-type]


def ltm(service: MemoryService, include_superseded: bool = False):
    records, _ = service.store.list(
        T, U, MemoryFilters(tier=Tier.LTM, include_superseded=include_superseded), 100
    )
    return records


def test_add_writes_an_embedded_ltm_record_with_provenance(service: MemoryService) -> None:
    [rec] = apply(
        service,
        [add("Maya lives in Tokyo.", kind=Kind.FACT, category=Category.PERSONAL_DETAILS)],
        session="s1",
    )
    stored = service.store.get(T, U, rec.id)
    assert stored is not None
    assert (stored.tier, stored.kind, stored.category, stored.version) == (
        Tier.LTM,
        Kind.FACT,
        Category.PERSONAL_DETAILS,
        1,
    )
    assert stored.source_ids == ["m1"]
    assert stored.session_id == "s1" and stored.scope == Scope.USER
    emb = service.store.embeddings(T, U, [rec.id])[rec.id]
    assert len(emb) == service.settings.embedding.embedding_dim


def test_update_supersedes_atomically_and_history_links_versions(service: MemoryService) -> None:
    [v1] = apply(service, [add("Maya lives in Tokyo.")])
    [v2] = apply(
        service,
        [ExtractionOp(op="UPDATE", target_id=v1.id, content="Maya lives in Osaka.", source_ids=["m2"])],
    )
    assert (v2.version, v2.replaces_id) == (2, v1.id)
    old = service.store.get(T, U, v1.id)
    assert old is not None and not old.is_current and old.superseded_at == NOW
    assert [r.content for r in versions.history(service.store, T, U, v2.id)] == [
        "Maya lives in Tokyo.",
        "Maya lives in Osaka.",
    ]
    assert v2.source_ids == ["m1", "m2"]
    assert [r.id for r in ltm(service)] == [v2.id]


def test_delete_writes_a_tombstone_version(service: MemoryService) -> None:
    [v1] = apply(service, [add("Maya has a dog named Rex.")])
    [tomb] = apply(service, [ExtractionOp(op="DELETE", target_id=v1.id, source_ids=["m2"])])
    assert tomb.deleted and tomb.version == 2 and tomb.replaces_id == v1.id
    assert ltm(service) == []


def test_none_writes_nothing(service: MemoryService) -> None:
    assert apply(service, [ExtractionOp(op="NONE", source_ids=["m1"])]) == []
    assert ltm(service) == []


def test_applying_the_same_operations_twice_changes_nothing(service: MemoryService) -> None:
    [v1] = apply(service, [add("Maya lives in Tokyo.")])
    ops = [
        ExtractionOp(op="UPDATE", target_id=v1.id, content="Maya lives in Osaka.", source_ids=["m2"]),
        add("Maya moved to Osaka last week.", source="m2", kind=Kind.EVENT),
    ]
    assert len(apply(service, ops)) == 2
    before = ltm(service, include_superseded=True)
    # A retried job: same ops again, and again with the target now superseded.
    assert apply(service, ops) == []
    assert apply(service, ops) == []
    assert ltm(service, include_superseded=True) == before


def test_duplicate_add_from_another_message_is_not_a_second_copy(service: MemoryService) -> None:
    apply(service, [add("Maya is vegetarian.")])
    assert apply(service, [add("Maya is vegetarian", source="m9")]) == []
    assert len(ltm(service)) == 1


def test_update_of_a_stale_target_applies_to_the_current_version(service: MemoryService) -> None:
    [v1] = apply(service, [add("Maya lives in Tokyo.")])
    [v2] = apply(
        service,
        [ExtractionOp(op="UPDATE", target_id=v1.id, content="Maya lives in Kyoto.", source_ids=["m2"])],
    )
    [v3] = apply(
        service,
        [ExtractionOp(op="UPDATE", target_id=v1.id, content="Maya lives in Osaka.", source_ids=["m3"])],
    )
    assert (v3.version, v3.replaces_id) == (3, v2.id)


def test_update_of_an_unknown_target_keeps_the_fact(service: MemoryService) -> None:
    [rec] = apply(
        service,
        [ExtractionOp(op="UPDATE", target_id="nope", content="Maya lives in Osaka.", source_ids=["m2"])],
    )
    assert rec.version == 1 and rec.content == "Maya lives in Osaka."


def test_context_scope_is_inherited(service: MemoryService) -> None:
    [rec] = apply(service, [add("Maya is planning the Q3 roadmap.")], session="s1", scope=Scope.CONTEXT)
    assert (rec.scope, rec.session_id) == (Scope.CONTEXT, "s1")


@pytest.mark.parametrize("bad", [add(""), ExtractionOp(op="DELETE", target_id="missing", source_ids=["m1"])])
def test_operations_with_nothing_to_act_on_write_nothing(service: MemoryService, bad: ExtractionOp) -> None:
    assert apply(service, [bad]) == []
