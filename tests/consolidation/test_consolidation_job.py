"""One user's consolidation job on the embedded backend: provenance, marks, idempotence, resumption."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from memstack.domain.consolidation.job import SUMMARY, SYNTHESIS
from memstack.domain.ingest import stm_memory_id
from memstack.domain.retrieval.types import SearchRequest
from memstack.factory import build_service
from memstack.models import Category, MemoryFilters, MemoryRecord, Message, Tier
from memstack.service import MemoryService

from tests.consolidation.conftest import (
    NOW,
    TURNS,
    consolidated,
    conversation,
    make_settings,
    shape,
    snapshot,
)

T, U = "acme", "sam"


def test_run_over_25_turns_writes_ltm_with_full_provenance_and_marks_them(csvc: MemoryService) -> None:
    messages = conversation()
    csvc.add(T, U, messages, infer=False)
    ids = {m.id for m in messages}

    report = csvc.consolidate(T, U, now=NOW)

    assert report["status"] == "done"
    assert report["read"] == 25 and report["marked"] == 25
    assert report["written"] == report["summaries"] + report["syntheses"] >= 2
    summaries = [r for r in consolidated(csvc, T, U) if r.metadata["consolidation"] == SUMMARY]
    assert len(summaries) == report["summaries"] == report["groups"]
    # Every turn is named by exactly one summary, and no record names a turn it did not come from.
    named = [sid for r in summaries for sid in r.source_ids]
    assert sorted(named) == sorted(ids)
    for r in consolidated(csvc, T, U):
        assert r.tier == Tier.LTM and set(r.source_ids) <= ids
        assert r.embedding_full is None  # listing never ships vectors; the store has them:
    assert set(csvc.store.embeddings(T, U, [r.id for r in summaries])) == {r.id for r in summaries}
    syntheses = [r for r in consolidated(csvc, T, U) if r.metadata["consolidation"] == SYNTHESIS]
    assert len(syntheses) == report["syntheses"]
    for s in syntheses:  # a synthesis names the sources of everything it was made from
        assert len(s.source_ids) >= 2
    # Marked in the STM store and on the tier-stm memory records (retrieval down-weights those).
    assert csvc.stm.unconsolidated(T, U, NOW) == []
    stm_records = csvc.store.get_many(T, U, [stm_memory_id(T, U, m) for m in ids])
    assert len(stm_records) == 25
    by_id = {r.id: r for r in summaries}
    for mid in ids:
        rec = stm_records[stm_memory_id(T, U, mid)]
        assert rec.metadata["consolidated"] is True
        assert mid in by_id[rec.metadata["consolidated_into"]].source_ids
    # Summaries stay within their token budget.
    from memstack.adapters.llm.rules.extractive_summariser import estimate_tokens

    assert all(
        estimate_tokens(r.content) <= csvc.settings.consolidation.summary_max_tokens for r in summaries
    )


def test_a_second_run_changes_nothing(csvc: MemoryService) -> None:
    csvc.add(T, U, conversation(), infer=False)
    csvc.consolidate(T, U, now=NOW)
    before = snapshot(csvc, T, U)

    again = csvc.consolidate(T, U, now=NOW)

    assert again["status"] == "nothing_to_do"
    assert (again["read"], again["written"], again["updated"], again["marked"]) == (0, 0, 0, 0)
    assert snapshot(csvc, T, U) == before


def test_only_new_turns_are_read_next_time_and_a_synthesis_is_updated_not_duplicated(
    csvc: MemoryService,
) -> None:
    pytorch = [
        "I mostly use PyTorch for training models.",
        "I train vision models with PyTorch every day.",
        "PyTorch is the framework I use for training.",
    ]
    csvc.add(T, U, conversation("a", turns=pytorch), infer=False)
    first = csvc.consolidate(T, U, now=NOW)
    assert first["syntheses"] == 0  # one summary and nothing related yet: nothing to synthesise
    more = [
        "I use PyTorch for training models at work too.",
        "Training models with PyTorch is my favourite part of the job.",
    ]
    csvc.add(T, U, conversation("b", turns=more), infer=False)
    second = csvc.consolidate(T, U, now=NOW)
    assert second["read"] == 2
    syntheses = [r for r in consolidated(csvc, T, U) if r.metadata["consolidation"] == SYNTHESIS]
    assert len(syntheses) == 1
    assert set(syntheses[0].source_ids) == {"a00", "a01", "a02", "b00", "b01"}
    more_still = ["I use PyTorch for training models on weekends as well."]
    csvc.add(T, U, conversation("c", turns=more_still), infer=False)
    third = csvc.consolidate(T, U, now=NOW)
    assert third["updated"] == 1  # the synthesis grew a new version instead of a second record
    current = [r for r in consolidated(csvc, T, U) if r.metadata["consolidation"] == SYNTHESIS]
    assert len(current) == 1 and current[0].version == 2
    assert current[0].replaces_id == syntheses[0].id
    assert "c00" in current[0].source_ids and set(syntheses[0].source_ids) <= set(current[0].source_ids)


def test_consolidation_never_restates_what_ltm_already_knows(csvc: MemoryService) -> None:
    turns = ["I prefer concise answers."]
    csvc.add(T, U, conversation("x", turns=turns), infer=False)
    csvc.consolidate(T, U, now=NOW)
    csvc.add(T, U, conversation("y", turns=turns), infer=False)  # the same thing said again, new id
    report = csvc.consolidate(T, U, now=NOW)
    assert report["read"] == 1 and report["unchanged"] == 1 and report["written"] == 0
    assert len(consolidated(csvc, T, U)) == 1
    y = csvc.store.get(T, U, stm_memory_id(T, U, "y00"))
    assert y is not None and y.metadata["consolidated_into"] == consolidated(csvc, T, U)[0].id


class Killed(Exception):
    """Stands in for the Lambda being stopped mid-run."""


def _kill_on(obj: Any, name: str, when: int, condition: Any = None) -> None:
    """Make ``obj.name`` raise ``Killed`` on its ``when``-th matching call (then behave again)."""
    original = getattr(obj, name)
    calls = {"n": 0}

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if condition is None or condition(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == when:
                raise Killed(name)
        return original(*args, **kwargs)

    setattr(obj, name, wrapper)


KILL_POINTS = {
    # after some summaries are written, before the rest
    "mid-summaries": ("apply", 3, None),
    # a summary is written but the run dies before tagging it as a summary
    "between-write-and-tag": ("store.mark", 2, lambda *a, **k: k.get("consolidation") == SUMMARY),
    # everything written, the summaries not yet flagged as synthesised
    "before-synthesised-flag": ("store.mark", 1, lambda *a, **k: "synthesised" in k),
    # the tier-stm records are marked, the STM entries are not
    "before-stm-marks": ("stm.mark_consolidated", 1, None),
}


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_an_interrupted_run_resumes_to_the_same_ltm_as_an_uninterrupted_one(
    tmp_path: Path, point: str
) -> None:
    messages = conversation()
    reference = build_service(make_settings(tmp_path / "ref"))
    resumed = build_service(make_settings(tmp_path / "killed"))
    try:
        for svc in (reference, resumed):
            svc.add(T, U, messages, infer=False)
        reference.consolidate(T, U, now=NOW)

        target, when, condition = KILL_POINTS[point]
        assert resumed.consolidator is not None
        if target == "apply":
            _ = resumed.consolidator.apply  # resolve the default before wrapping it
            _kill_on(resumed.consolidator, "_apply", when, condition)
        else:
            owner, name = target.split(".")
            _kill_on(getattr(resumed, owner), name, when, condition)
        with pytest.raises(Killed):
            resumed.consolidate(T, U, now=NOW)
        report = resumed.consolidate(T, U, now=NOW)

        assert report["status"] == "done"
        assert shape(resumed, T, U) == shape(reference, T, U)
        assert resumed.stm.unconsolidated(T, U, NOW) == []
        again = resumed.consolidate(T, U, now=NOW)
        assert again["status"] == "nothing_to_do"
    finally:
        reference.close()
        resumed.close()


def test_search_returns_consolidated_ltm_with_its_sources_and_down_weights_consolidated_stm(
    csvc: MemoryService,
) -> None:
    messages = conversation()
    csvc.add(T, U, messages, infer=False)
    csvc.consolidate(T, U, now=NOW)
    result = csvc.search(SearchRequest(tenant=T, user_id=U, query="Tokyo trip hotel", top_k=10, explain=True))
    summaries = [h for h in result.hits if h.record.metadata.get("consolidation") == SUMMARY]
    assert summaries, "the Tokyo summary should be found"
    tokyo = {m.id for m in messages if "Tokyo" in m.content}
    assert tokyo & set(summaries[0].record.source_ids)
    stm_hits = [h for h in result.hits if h.record.tier == Tier.STM]
    assert all(
        h.stages.get("consolidated_weight") == csvc.settings.retrieval.consolidated_stm_weight
        for h in stm_hits
    )


def test_tenants_and_users_are_consolidated_separately(csvc: MemoryService) -> None:
    csvc.add(T, U, conversation(), infer=False)
    csvc.add(T, "other", conversation(), infer=False)
    csvc.add("globex", U, conversation(), infer=False)
    csvc.consolidate(T, U, now=NOW)
    assert len(csvc.stm.unconsolidated(T, "other", NOW)) == len(TURNS)
    assert len(csvc.stm.unconsolidated("globex", U, NOW)) == len(TURNS)
    assert consolidated(csvc, T, "other") == [] and consolidated(csvc, "globex", U) == []
    records, _ = csvc.list(T, "other", MemoryFilters(tier=Tier.STM), 100)
    assert not any(r.metadata.get("consolidated") for r in records)


def test_extracted_memories_decide_the_groups_when_extraction_ran(csvc: MemoryService) -> None:
    messages = conversation()
    csvc.add(T, U, messages, sync=True)  # the extract jobs run first
    report = csvc.consolidate(T, U, now=NOW)
    assert report["marked"] == 25
    for summary in (r for r in consolidated(csvc, T, U) if r.metadata["consolidation"] == SUMMARY):
        extracted = [
            x
            for sid in summary.source_ids
            for x in csvc.store.find_by_source(T, U, sid)
            if x.tier == Tier.LTM and not x.metadata.get("consolidation")
        ]
        if extracted and summary.category is not None:
            assert summary.category in {x.category for x in extracted}


def test_a_zero_weight_hides_consolidated_stm_from_search(tmp_path: Path) -> None:
    from memstack.settings import load_settings

    svc = build_service(load_settings(data_dir=tmp_path, embedder="hashing", consolidated_stm_weight=0.0))
    try:
        svc.add(T, U, conversation(), infer=False)
        request = SearchRequest(tenant=T, user_id=U, query="Tokyo trip hotel", top_k=10)
        assert any(h.record.tier == Tier.STM for h in svc.search(request).hits)
        svc.consolidate(T, U, now=NOW)
        hits = svc.search(request).hits
        assert hits and all(h.record.tier == Tier.LTM for h in hits)
    finally:
        svc.close()


def test_a_run_is_bounded_and_the_next_one_takes_the_rest(tmp_path: Path) -> None:
    from memstack.settings import load_settings

    svc = build_service(load_settings(data_dir=tmp_path, embedder="hashing", consolidation_max_entries=10))
    try:
        messages = conversation()
        svc.add(T, U, messages, infer=False)
        reads = []
        while (report := svc.consolidate(T, U, now=NOW))["status"] == "done":
            reads.append((report["read"], report["more_pending"]))
        assert reads == [(10, True), (10, True), (5, False)]
        summaries = [r for r in consolidated(svc, T, U) if r.metadata["consolidation"] == SUMMARY]
        assert sorted(s for r in summaries for s in r.source_ids) == sorted(m.id for m in messages)
    finally:
        svc.close()


def test_turns_extraction_already_made_into_memories_are_not_summarised_again(csvc: MemoryService) -> None:
    csvc.add(T, U, conversation(), sync=True)  # extraction first: it knows most of these turns
    extracted_sources = {
        sid
        for r in csvc.list(T, U, MemoryFilters(tier=Tier.LTM), limit=500)[0]
        if not r.metadata.get("consolidation")
        for sid in r.source_ids
    }
    assert extracted_sources, "the local extractor should have made memories of this conversation"
    report = csvc.consolidate(T, U, now=NOW)
    assert report["known"] == len(extracted_sources) and report["marked"] == 25
    for summary in (r for r in consolidated(csvc, T, U) if r.metadata["consolidation"] == SUMMARY):
        assert not set(summary.source_ids) & extracted_sources, summary.content
    # the known turns are consolidated into the memory extraction made of them
    marks = csvc.store.get(T, U, stm_memory_id(T, U, sorted(extracted_sources)[0]))
    assert marks is not None and marks.metadata["consolidated"] is True
    assert marks.metadata["consolidated_into"]


def test_the_assistants_turns_are_never_summarised_as_the_users_memory(csvc: MemoryService) -> None:
    from memstack.models import Message, Role

    assistant = [
        Message(
            id="a1", role=Role.ASSISTANT, content="Congratulations! How are you celebrating?", timestamp=NOW
        ),
        Message(id="a2", role=Role.ASSISTANT, content="I will remember that you love hiking.", timestamp=NOW),
    ]
    chat = [*conversation()[:6], *assistant]
    csvc.add(T, U, chat, infer=False)
    report = csvc.consolidate(T, U, now=NOW)
    assert report["skipped"] == 2 and report["marked"] == 8
    written = consolidated(csvc, T, U)
    assert written and all(not {"a1", "a2"} & set(r.source_ids) for r in written)


class _FixedSummariser:
    """Summaries that share most words (so they cluster) and one synthesis about a move and a job."""

    name = "fixed"
    SYNTHESIS = "Sam is relocating to Osaka next month for Kenji's new job and will work remotely."

    def summarise(self, texts: list[str], max_tokens: int) -> str:
        return "Sam and Kenji in Osaka: " + " ".join(texts)

    def synthesise(self, summaries: list[str], existing: list[MemoryRecord], max_tokens: int) -> list[str]:
        return [self.SYNTHESIS]


def test_a_synthesis_is_filed_under_what_it_says_not_its_first_sources_category(tmp_path: Path) -> None:
    from memstack.domain.categories import categorise

    service = build_service(make_settings(tmp_path / "d"), summariser=_FixedSummariser())
    try:
        # Two dinners (two days apart: two summaries) and one move: the sources are mostly "dietary".
        said = [
            ("d1", "Kenji is taking me to an omakase dinner in Ginza on Friday.", 0),
            ("mv", "We're relocating to Osaka next month for Kenji's new job.", 1),
            ("d2", "We had a lovely sushi dinner with Kenji in Osaka.", 50),
        ]
        start = NOW - timedelta(hours=60)
        messages = [
            Message(id=mid, speaker="Sam", content=text, timestamp=start + timedelta(hours=h))
            for mid, text, h in said
        ]
        service.add(T, U, messages, infer=False)
        service.consolidate(T, U)
        records, _ = service.list(T, U, MemoryFilters(tier=Tier.LTM), 100)
        [synthesis] = [r for r in records if r.metadata.get("consolidation") == SYNTHESIS]
    finally:
        service.close()
    assert synthesis.content == _FixedSummariser.SYNTHESIS
    assert synthesis.category == categorise(_FixedSummariser.SYNTHESIS) != Category.DIETARY
