"""`memstack eval small`: small mixed stores (extracted turns, memories written by key) and questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memstack.evaluation.small import (
    QuestionResult,
    SmallFormatError,
    SmallScenario,
    evaluate_small,
    load_small,
    summarise,
)
from memstack.factory import build_embedder
from memstack.settings import Settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "retrieval"

BOB = {
    "id": "bob",
    "user": "bob",
    "turns": ["I started a new job at a bakery last week.", "Our cat Miso hates the vacuum cleaner."],
    "direct": {"car": "Bob drives a blue Honda Jazz."},
    "questions": [
        ["what car does Bob drive?", "Honda Jazz"],
        ["what is Bob's cat called?", "Miso"],
        ["x?", None],
    ],
}


def test_the_shipped_scenarios_load_and_each_answer_names_one_item() -> None:
    scenarios = load_small(EXAMPLES / "small.jsonl")
    assert len(scenarios) >= 25
    assert any(s.direct and s.turns for s in scenarios)  # mixed stores among them
    assert any(s.speaker for s in scenarios) and any(s.speaker is None for s in scenarios)


def test_an_answer_phrase_must_name_exactly_one_item(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({**BOB, "questions": [["q?", "Bob"]]}) + "\n")  # only the car memory: fine
    assert load_small(path)[0].answer("Bob") == "k:car"
    path.write_text(json.dumps({**BOB, "questions": [["q?", "a b"]]}) + "\n")  # "at a bakery", "a blue"
    with pytest.raises(SmallFormatError, match=r"s\.jsonl:1"):
        load_small(path)
    path.write_text(json.dumps({**BOB, "batches": [1]}) + "\n")  # batches must cover the turns
    with pytest.raises(SmallFormatError, match="batches"):
        load_small(path)


def test_a_hit_counts_when_it_is_the_answer_or_was_extracted_from_it(settings: Settings) -> None:
    scenario = SmallScenario.model_validate(BOB)
    report = evaluate_small([scenario], settings, build_embedder(settings))
    assert report.scenarios == 1 and report.questions == 3
    by_query = {r.query: r for r in report.results}
    car = by_query["what car does Bob drive?"]
    assert car.kind == "direct" and car.rank is not None
    right = [content for content, _, ok in car.hits if ok]
    assert right == ["Bob drives a blue Honda Jazz."]  # the memory written by key, and nothing else
    cat = by_query["what is Bob's cat called?"]
    assert cat.kind == "turn"
    # the turn and any memory extracted from it count; the bakery turn never does
    assert all("Miso" in content for content, _, ok in cat.hits if ok)
    assert by_query["x?"].answer is None and by_query["x?"].rank is None
    assert report.records >= 3  # two turns, their memories, one written memory


def test_the_figures_follow_the_ranks_and_scores() -> None:
    results = [
        QuestionResult("s", "a", "t0", "turn", 1, 0.9, [("x", 0.9, True), ("y", 0.2, False)]),
        QuestionResult("s", "b", "k:car", "direct", 2, 0.5, [("y", 0.5, False), ("x", 0.4, True)]),
        QuestionResult("s", "c", None, None, None, 0.1, [("y", 0.1, False)]),
    ]
    metrics, by_kind = summarise(results)
    assert metrics["hit@1"] == 0.5 and metrics["mrr@10"] == pytest.approx(0.75)
    assert by_kind["turn"]["hit@1"] == 1.0 and by_kind["direct"]["hit@1"] == 0.0
    # right hits 0.9 and 0.4 against wrong 0.2 and 0.5: 3 of 4 pairs ordered
    assert metrics["hit_auroc"] == pytest.approx(0.75)
    assert metrics["abstention_auroc"] == 1.0  # both answerable tops above the unanswerable one
