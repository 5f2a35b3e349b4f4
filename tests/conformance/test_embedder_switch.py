"""A store records its embedder, refuses another, and ``reembed`` switches it, on every backend (issue 26).

Switching MEMSTACK_EMBEDDER on an existing store was a raw ``ValueError: matmul``
(mpnet's 768 dimensions over MiniLM's 384) or, with the same dimension (the
hashing embedder), silently wrong rankings. Here the second embedder has the
same dimension as the first, the case nothing else would catch.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain import versions
from memstack.domain.embedder_record import EmbedderMismatch, check_embedder, recorded
from memstack.domain.reembed import reembed
from memstack.domain.transfer import embed_text, user_records
from memstack.models import MemoryFilters, MemoryRecord, Tier

from tests.reliability.faults import Crash

from .conftest import COARSE_DIM, FULL_DIM
from .test_store_conformance import rec

OLD = HashingEmbedder(FULL_DIM)
NOW = datetime(2026, 1, 5, tzinfo=UTC)


class Reversed:
    """Another model of the same dimension: the hashing vectors, reversed."""

    dim = FULL_DIM
    name = f"reversed-hashing-{FULL_DIM}"

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ascontiguousarray(OLD.embed(texts)[:, ::-1])


NEW = Reversed()


def _fill(store: Any) -> None:
    """Two tenants, three users: raw turns, a superseded memory, a deleted one (no vector)."""
    turn = rec("Ann: we moved in May", tier=Tier.STM, speaker="Ann", source_ids=["m1"])
    first = rec("Ann lives in Lisbon", minutes=1)
    gone = rec("Ann likes olives", minutes=2)
    store.put([turn, first, gone, rec("Bo plays chess", user="u2"), rec("Cy sails", tenant="t2", user="u3")])
    moved = versions.new_version(first, content="Ann lives in Porto", embedder=OLD, coarse_dim=COARSE_DIM)
    store.supersede("t1", "u1", first.id, moved)
    deleted = versions.new_version(gone, content=None, embedder=None, coarse_dim=COARSE_DIM, deleted=True)
    store.supersede("t1", "u1", gone.id, deleted)


def _everything(store: Any) -> dict[str, MemoryRecord]:
    """Every version of every record of the three users."""
    out: dict[str, MemoryRecord] = {}
    for tenant, user in (("t1", "u1"), ("t1", "u2"), ("t2", "u3")):
        out.update((r.id, r) for r in user_records(store, tenant, user))  # deleted versions too
    return out


def _same_records(before: dict[str, MemoryRecord], after: dict[str, MemoryRecord]) -> None:
    def shape(r: MemoryRecord) -> tuple[Any, ...]:
        return (r.tenant, r.user_id, r.content, r.is_current, r.deleted, r.version, r.replaces_id, r.tier)

    assert {k: shape(r) for k, r in after.items()} == {k: shape(r) for k, r in before.items()}


def _vectors_are_from(store: Any, records: dict[str, MemoryRecord], embedder: Any) -> None:
    for r in records.values():
        got = store.embeddings(r.tenant, r.user_id, [r.id])
        if r.deleted:
            continue
        want = embedder.embed([embed_text(r)])[0]
        assert np.allclose(got[r.id], want, atol=1e-5), r.content


def test_a_store_refuses_an_embedder_other_than_the_one_it_records(store: Any) -> None:
    configs = store.tenant_config_store()
    check_embedder(configs, OLD, NOW)  # the first start records it
    check_embedder(configs, OLD, NOW)  # the same one again: fine
    assert recorded(configs).document == {"embedder": OLD.name, "dim": FULL_DIM}
    for other in (NEW, HashingEmbedder(FULL_DIM * 2)):
        with pytest.raises(EmbedderMismatch) as refused:
            check_embedder(configs, other, NOW)
        message = str(refused.value)
        assert OLD.name in message and other.name in message and "memstack reembed" in message
    # No tenant's configuration sees the record.
    assert configs.get("t1").version == 0


def test_reembed_gives_every_record_the_new_embedders_vector_and_keeps_everything_else(
    store: Any, tmp_path: Path
) -> None:
    configs = store.tenant_config_store()
    check_embedder(configs, OLD, NOW)
    _fill(store)
    before = _everything(store)
    report = reembed(store, NEW, COARSE_DIM, configs, tmp_path / "work", lambda: NOW)
    assert (report.tenants, report.users, report.records) == (2, 3, len(before))
    assert report.reembedded == len([r for r in before.values() if not r.deleted])
    after = _everything(store)
    _same_records(before, after)
    _vectors_are_from(store, after, NEW)
    check_embedder(configs, NEW, NOW)  # the store now records the new one ...
    with pytest.raises(EmbedderMismatch):
        check_embedder(configs, OLD, NOW)  # ... and refuses the old
    assert not (tmp_path / "work").exists()
    # Every user is listed again (GET /v1/users, and the next re-embedding, read this).
    assert store.tenants() == ["t1", "t2"]
    assert [u.user_id for u in store.users("t1", 10)[0]] == ["u1", "u2"]
    # Search ranks by the new vectors: the query's own text comes first.
    query = NEW.embed(["Bo plays chess"])[0]
    coarse = query[:COARSE_DIM] / np.linalg.norm(query[:COARSE_DIM])
    hits = store.vector_search("t1", "u2", coarse, 1, MemoryFilters())
    assert [after[h.id].content for h in hits] == ["Bo plays chess"]


class _CrashOnImport:
    """The store, except that the process dies on the ``crash_at``-th write of the import."""

    def __init__(self, store: Any, crash_at: int) -> None:
        self._store, self._left = store, crash_at

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def put(self, records: list[MemoryRecord], **kwargs: Any) -> None:
        self._left -= 1
        if self._left == 0:
            raise Crash("the process dies between the user's erase and its import")
        self._store.put(records, **kwargs)


def test_a_reembed_stopped_between_a_users_erase_and_import_is_finished_by_the_next_run(
    store: Any, tmp_path: Path
) -> None:
    configs = store.tenant_config_store()
    check_embedder(configs, OLD, NOW)
    _fill(store)
    before = _everything(store)
    work = tmp_path / "work"
    with pytest.raises(Crash):
        reembed(_CrashOnImport(store, crash_at=2), NEW, COARSE_DIM, configs, work, lambda: NOW)
    # Stopped: one user done, the next erased and waiting in its file; the store still refuses NEW.
    assert len(_everything(store)) < len(before)
    with pytest.raises(EmbedderMismatch):
        check_embedder(configs, NEW, NOW)
    report = reembed(store, NEW, COARSE_DIM, configs, work, lambda: NOW)
    assert report.resumed == 1 and report.skipped_done == 1
    after = _everything(store)
    _same_records(before, after)
    _vectors_are_from(store, after, NEW)
    check_embedder(configs, NEW, NOW)
