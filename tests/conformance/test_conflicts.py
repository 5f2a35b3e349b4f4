"""Contradictions on every backend: ``conflicts_with`` is stored, linked both ways, and searched as a pair."""

from __future__ import annotations

from typing import Any

from memstack.domain.extraction.apply import apply_operations
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.transfer import export_lines, import_lines
from memstack.models import MemoryFilters, Scope
from memstack.ports.llm import ExtractionOp

from .conftest import COARSE_DIM
from .test_import_as_new_user import EMB
from .test_store_conformance import rec


def test_a_link_is_stored_added_once_and_kept_to_its_owner(store: Any) -> None:
    never = rec("Wes has never written a Flask route.")
    did = rec("Wes implemented the login route in Flask.", minutes=1, conflicts_with=[never.id])
    store.put([never, did])
    assert store.get("t1", "u1", did.id).conflicts_with == [never.id]  # written with the record
    assert store.get("t1", "u1", never.id).conflicts_with == []

    assert store.link_conflicts("t1", "u1", {never.id: [did.id]}) == 1
    assert store.link_conflicts("t1", "u1", {never.id: [did.id]}) == 0  # already there: nothing changes
    assert store.get("t1", "u1", never.id).conflicts_with == [did.id]
    # Every read path returns it: by id, several ids, listing, provenance.
    assert store.get_many("t1", "u1", [never.id])[never.id].conflicts_with == [did.id]
    listed = {r.id: r.conflicts_with for r in store.list("t1", "u1", MemoryFilters(), 10, None)[0]}
    assert listed == {never.id: [did.id], did.id: [never.id]}
    # Another tenant's or user's link of the same id changes nothing here, and an unknown id nothing at all.
    assert store.link_conflicts("t2", "u1", {never.id: ["x"]}) == 0
    assert store.link_conflicts("t1", "u2", {never.id: ["x"]}) == 0
    assert store.link_conflicts("t1", "u1", {"no-such-memory": ["x"]}) == 0
    assert store.get("t1", "u1", never.id).conflicts_with == [did.id]


def test_a_second_link_is_appended(store: Any) -> None:
    a, b, c = (
        rec(t, minutes=i) for i, t in enumerate(["Zoe is allergic to cats.", "Zoe has three cats.", "x"])
    )
    store.put([a, b, c])
    store.link_conflicts("t1", "u1", {a.id: [b.id]})
    assert store.link_conflicts("t1", "u1", {a.id: [b.id, c.id], b.id: [a.id]}) == 2
    assert store.get("t1", "u1", a.id).conflicts_with == [b.id, c.id]
    assert store.get("t1", "u1", b.id).conflicts_with == [a.id]


def _conflicting_pair(service: Any) -> tuple[Any, Any]:
    """ "I have never written a Flask route", then a CONFLICT with it, through the extraction write path."""
    first = apply_operations(
        service.store,
        service.embedder,
        COARSE_DIM,
        "t1",
        "u1",
        [ExtractionOp(op="ADD", content="Wes has never written a Flask route.", source_ids=["m1"])],
        session_id=None,
        scope=Scope.USER,
    )[0]
    conflict = ExtractionOp(
        op="CONFLICT",
        target_id=first.id,
        content="Wes implemented the login route in Flask for the admin panel.",
        source_ids=["m2"],
    )
    second = apply_operations(
        service.store, service.embedder, COARSE_DIM, "t1", "u1", [conflict], session_id=None, scope=Scope.USER
    )[0]
    return first, second


def test_a_conflict_keeps_both_current_and_links_them_both_ways(service: Any) -> None:
    first, second = _conflicting_pair(service)
    old, new = service.store.get("t1", "u1", first.id), service.store.get("t1", "u1", second.id)
    assert old.is_current and new.is_current
    assert old.conflicts_with == [second.id]
    assert new.conflicts_with == [first.id]


def test_search_returns_the_pair_marked_together(service: Any) -> None:
    first, second = _conflicting_pair(service)
    service.store.put([rec("Wes plays the trumpet in a brass band.", minutes=5)])
    hits = service.search(
        SearchRequest(tenant="t1", user_id="u1", query="has Wes never written a route", top_k=1)
    )
    ids = [h.record.id for h in hits.hits]
    assert ids[:2] in ([first.id, second.id], [second.id, first.id])  # top_k 1: the counterpart came with it
    by_id = {h.record.id: h for h in hits.hits}
    assert by_id[first.id].record.conflicts_with == [second.id]
    assert by_id[second.id].record.conflicts_with == [first.id]
    assert by_id[first.id].score == by_id[second.id].score


def test_a_settled_conflict_is_no_longer_paired(service: Any) -> None:
    first, second = _conflicting_pair(service)
    # A later statement replaces one of them: the pair is settled, the survivor shown alone.
    apply_operations(
        service.store,
        service.embedder,
        COARSE_DIM,
        "t1",
        "u1",
        [ExtractionOp(op="DELETE", target_id=first.id, source_ids=["m3"])],
        session_id=None,
        scope=Scope.USER,
    )
    hits = service.search(SearchRequest(tenant="t1", user_id="u1", query="Wes Flask route", top_k=5)).hits
    shown = {h.record.id: h.record.conflicts_with for h in hits}
    assert first.id not in shown
    assert shown[second.id] == []


def test_a_pair_imported_as_another_user_links_the_copies(store: Any) -> None:
    never = rec("Wes has never written a Flask route.")
    did = rec("Wes implemented the login route in Flask.", minutes=1, conflicts_with=[never.id])
    store.put([never, did])
    store.link_conflicts("t1", "u1", {never.id: [did.id]})
    report = import_lines(store, list(export_lines(store, "t1", "u1", EMB)), EMB, COARSE_DIM, user_id="u2")
    assert report.imported == 2
    copies = {r.content: r for r in store.list("t1", "u2", MemoryFilters(), 10)[0]}
    copy_never, copy_did = copies[never.content], copies[did.content]
    assert copy_never.conflicts_with == [copy_did.id] and copy_did.conflicts_with == [copy_never.id]
    assert {copy_never.id, copy_did.id}.isdisjoint({never.id, did.id})
