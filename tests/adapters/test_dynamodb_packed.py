"""A packed snapshot (what a cold container loads from S3) answers exactly as the snapshot it was made of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memstack.adapters.dynamodb import items
from memstack.adapters.dynamodb.packed import MAGIC, PackedFormatError, pack, unpack
from memstack.adapters.dynamodb.snapshot import Snapshot
from memstack.domain import record_filter
from memstack.models import MemoryFilters, MemoryRecord, Scope, Tier

from ..strategies import memory_filters, metadata_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 12


def _records(n: int, seed: int = 5) -> list[MemoryRecord]:
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(60)]
    out = []
    for i in range(n):
        vec = rng.standard_normal(DIM).astype(np.float32)
        vec /= np.linalg.norm(vec)
        out.append(
            MemoryRecord(
                tenant="t",
                user_id="u",
                content=" ".join(rng.choice(vocabulary, size=int(rng.integers(2, 9)))),
                tier=Tier.LTM if i % 3 else Tier.STM,
                scope=Scope.CONTEXT if i % 11 == 0 else Scope.USER,
                session_id=["s1", "s2", None][i % 3],
                created_at=T0 + timedelta(minutes=i),
                event_time=T0 + timedelta(days=i % 17) if i % 4 == 0 else None,
                is_current=i % 13 != 0,
                deleted=i % 29 == 0,
                replaces_id=f"old-{i}" if i % 7 == 0 else None,
                source_ids=[f"msg-{i // 2}"],
                embedding_full=vec.tolist() if i % 19 else None,
                metadata=metadata_of(rng),
            )
        )
    return out


RECORDS = _records(300)
SOURCE = Snapshot("g1", [items.to_item(r) for r in RECORDS], seq=7, epoch="e1")
LOADED = unpack(bytearray(pack(SOURCE)))
QUERIES = ["w1 w2", "w3", "w7 w8 w9 w10", "nothing here"]


@settings(max_examples=60, deadline=None)
@given(filters=memory_filters(T0, 30), seed=st.integers(0, 1000))
def test_a_loaded_snapshot_ranks_exactly_as_the_one_packed(filters: MemoryFilters, seed: int) -> None:
    query = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    assert LOADED.vector_search(query, 50, filters) == SOURCE.vector_search(query, 50, filters)
    for text in QUERIES:
        assert LOADED.bm25_search(text, 50, filters) == SOURCE.bm25_search(text, 50, filters)
    assert LOADED.mask(filters, search=False).tolist() == SOURCE.mask(filters, search=False).tolist()


def test_the_loaded_vector_search_is_the_exact_full_vector_top_k() -> None:
    rng = np.random.default_rng(2)
    query = rng.standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    filters = MemoryFilters(tier=Tier.LTM)
    allowed = [r for r in RECORDS if r.embedding_full and record_filter.matches(r, filters, search=True)]
    brute = sorted(allowed, key=lambda r: -float(np.asarray(r.embedding_full, np.float32) @ query))
    assert [h.id for h in LOADED.vector_search(query, 10, filters)] == [r.id for r in brute[:10]]


def test_records_lineage_and_vectors_survive_the_round_trip() -> None:
    loaded = unpack(pack(SOURCE))
    assert loaded.ids == SOURCE.ids and (loaded.token, loaded.seq, loaded.epoch) == ("g1", 7, "e1")
    hits = loaded.bm25_search("w1 w2", 20, MemoryFilters())
    assert hits and not any(loaded.decoded(i) for i in range(loaded.size))  # a search decodes nothing
    assert loaded.by_source("msg-3") == SOURCE.by_source("msg-3") and len(loaded.by_source("msg-3")) == 2
    successor = loaded.successor("old-7")
    assert successor == SOURCE.successor("old-7") and successor is not None and successor.id == RECORDS[7].id
    assert sum(loaded.decoded(i) for i in range(loaded.size)) == 2  # exactly those asked for: rows 6, 7
    assert loaded.records == SOURCE.records  # records without vectors: those are the matrix's
    with_vectors = [r.id for r in RECORDS[:40]]
    got, want = loaded.full_vectors(with_vectors), SOURCE.full_vectors(with_vectors)
    assert got.keys() == want.keys() and all(np.array_equal(got[i], want[i]) for i in got)


def test_packing_a_loaded_snapshot_again_gives_the_same_bytes() -> None:
    data = pack(SOURCE)
    assert pack(unpack(bytearray(data))) == data


def test_a_loaded_snapshot_follows_writes_like_the_original() -> None:
    """Writes applied to the loaded snapshot (its matrix a read-only view at first) = to the source."""
    more = _records(340, seed=9)[300:]
    retired = [items.to_item(r.model_copy(update={"is_current": False})) for r in RECORDS[20:25]]
    rows = [*(items.to_item(r) for r in more), *retired]
    loaded = unpack(pack(SOURCE))  # bytes: a read-only buffer
    a = SOURCE.applied(rows, token="g2", seq=8, epoch="e1")
    b = loaded.applied(rows, token="g2", seq=8, epoch="e1")
    query = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    for filters in (MemoryFilters(), MemoryFilters(session_id="s1")):
        assert b.vector_search(query, 30, filters) == a.vector_search(query, 30, filters)
        for text in QUERIES:
            assert b.bm25_search(text, 30, filters) == a.bm25_search(text, 30, filters)
    assert b.records == a.records


def test_bytes_that_are_not_a_snapshot_are_refused() -> None:
    with pytest.raises(PackedFormatError):
        unpack(b"not a snapshot at all")
    with pytest.raises(PackedFormatError):
        unpack(pack(SOURCE)[:-4096])
    garbled = bytearray(pack(SOURCE))
    garbled[len(MAGIC) + 8] ^= 0xFF  # the header's first byte: not JSON (nor UTF-8)
    with pytest.raises(PackedFormatError):
        unpack(bytes(garbled))


def test_room_after_the_buffer_takes_the_rows_later_writes_append_without_copying_the_matrix() -> None:
    data = pack(SOURCE)
    buffer = bytearray(data) + bytearray(DIM * 4 * 8)  # eight spare rows, as a cold load leaves
    loaded = unpack(buffer, len(data))
    fresh = [items.to_item(r) for r in _records(305, seed=3)[300:]]
    nxt = loaded.applied(fresh, token="g2", seq=8, epoch="e1")
    assert (loaded.size, nxt.size) == (300, 305)
    assert np.shares_memory(nxt.matrix, np.frombuffer(buffer, dtype=np.uint8))
    assert nxt.vector_search(
        np.ones(DIM, np.float32) / np.sqrt(DIM), 400, MemoryFilters(include_superseded=True)
    )
