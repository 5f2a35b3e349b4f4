"""`memstack eval beam`: the loader, the whole-question figures and the harness on a tiny synthetic chat."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.evaluation.beam import CATEGORIES, BeamFormatError, load_beam
from memstack.evaluation.recall import QuestionResult
from memstack.evaluation.runner import TurnBaselines, evaluate, messages_of
from memstack.evaluation.separation import (
    SearchLevel,
    auroc,
    evidence_summary,
    ordering_summary,
    update_ordering,
)
from memstack.models import Role
from memstack.settings import Settings

BIN = Path(sys.executable).with_name("memstack")

TURNS = [
    ("user", 1, "I am building a chat server with Express on port 3000."),
    ("assistant", 1, "Good choice. Express handles routing; add a socket layer for live messages."),
    ("user", 1, "My Redis instance uses 40 megabytes for the session cache."),
    ("assistant", 1, "That is a small footprint for a session cache."),
    ("user", 2, "Update: the Redis instance now uses 95 megabytes after the launch."),
    ("assistant", 2, "Growth after a launch is normal; watch the eviction policy."),
    ("user", 2, "I adopted a greyhound called Pixel last weekend."),
    ("assistant", 2, "Congratulations on Pixel!"),
]


def beam_file(tmp_path: Path, *, gz: bool = True) -> Path:
    turns = [
        {
            "id": i,
            "role": role,
            "batch": batch,
            "timestamp": f"2024-0{batch}-15T12:{i:02d}:00Z",
            "content": text,
        }
        for i, (role, batch, text) in enumerate(TURNS)
    ]
    questions: list[dict[str, Any]] = [
        {
            "qid": "1:ie:0",
            "category": "information_extraction",
            "question": "Which port is the Express chat server on?",
            "evidence": [0],
        },
        {
            "qid": "1:ku:0",
            "category": "knowledge_update",
            "question": "How much memory does my Redis instance use?",
            "evidence": [2, 4],
            "evidence_groups": {"original_info": [2], "updated_info": [4]},
        },
        {
            "qid": "1:eo:0",
            "category": "event_ordering",
            "question": "In what order did I mention Express and Pixel?",
            "evidence": [[0], [6, 99]],
        },
        {"qid": "1:ab:0", "category": "abstention", "question": "What colour is my car?", "evidence": []},
        {"qid": "1:ku:1", "category": "knowledge_update", "question": "What is my CPU load?", "evidence": []},
    ]
    data = {
        "source": {},
        "skipped": [],
        "conversations": [{"id": "1", "batches": [], "turns": turns, "questions": questions}],
    }
    path = tmp_path / ("beam.json.gz" if gz else "beam.json")
    raw = json.dumps(data).encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def test_loader_reads_roles_batches_groups_and_abstention(tmp_path: Path) -> None:
    for gz in (True, False):
        (conv,) = load_beam(beam_file(tmp_path, gz=gz))
        assert conv.sample_id == "1" and len(conv.turns) == 8 and set(conv.sessions) == {1, 2}
        assert conv.turns[1].role == Role.ASSISTANT and conv.turns[1].speaker is None
        assert [m.id for m in messages_of(conv, 2)] == ["4", "5", "6", "7"]
        assert conv.last_session_time == conv.turns[-1].timestamp
        by_category = {q.category_name: q for q in conv.questions}
        # The knowledge update without evidence cannot be scored: it is left out and counted.
        assert len(conv.questions) == 4 and conv.unusable == 1
        update = by_category["knowledge_update"]
        assert update.evidence == ("2", "4") and update.groups == {
            "original_info": ("2",),
            "updated_info": ("4",),
        }
        # Nested lists are flattened; an id naming no turn is dropped and kept as dropped.
        ordering = by_category["event_ordering"]
        assert ordering.evidence == ("0", "6") and ordering.dropped_evidence == ("99",)
        abstention = by_category["abstention"]
        assert abstention.answerable is False and abstention.evidence == ()
        assert all(q.answerable for q in conv.questions if q is not abstention)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"conversations": []}', "a list of conversations"),
        ('{"conversations": [{"id": 1, "turns": []}]}', "missing 'questions'"),
        ('{"conversations": [{"id": 1, "turns": [{"id": 0}], "questions": []}]}', "turn 0: bad or missing"),
        ("not json", "not valid JSON"),
    ],
)
def test_malformed_files_say_where(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BeamFormatError, match=message):
        load_beam(path)


def test_slots_without_a_new_turn() -> None:
    # cited turns after each result: 1, 1, 2, 2, 3 -> slots 2 and 4 add nothing new
    results = [["a"], ["a"], ["b"], [], ["b", "c"]]
    res = QuestionResult.from_results("x", results, ["c"], lambda t: t, 10)
    assert [res.value("no_new", k) for k in (1, 2, 3, 4, 5, 10)] == [0.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    distinct = QuestionResult.from_results("x", [["a"], ["b"], ["c"]], ["c"], lambda t: t, 10)
    assert distinct.value("no_new", 3) == 0.0


def test_auroc_counts_pairs_and_ties() -> None:
    assert auroc([0.9, 0.8], [0.1, 0.8]) == pytest.approx(3.5 / 4)
    assert auroc([0.1], [0.9]) == 0.0 and auroc([0.5], [0.5]) == 0.5
    assert auroc([], [0.1]) is None and auroc([0.1], []) is None


def test_evidence_summary_compares_the_search_evidence_with_the_top_score() -> None:
    rows = [
        SearchLevel(evidence=0.9, top_score=0.2, answerable=True, found_in_10=True),
        SearchLevel(evidence=0.8, top_score=0.6, answerable=True, found_in_10=False),
        SearchLevel(evidence=0.3, top_score=0.7, answerable=False, found_in_10=False),
    ]
    summary = evidence_summary(rows)
    assert summary["answerable"]["evidence"] == 1.0 and summary["answerable"]["top_score"] == 0.0
    assert (summary["answerable"]["yes"], summary["answerable"]["no"]) == (2, 1)
    assert summary["answerable"]["evidence_median_yes"] == pytest.approx(0.85)
    assert summary["found_in_10"]["evidence"] == 1.0 and summary["found_in_10"]["top_score"] == 0.0
    assert evidence_summary(rows[:2])["answerable"]["evidence"] is None  # no unanswerable question


def test_update_ordering() -> None:
    groups = {"original_info": ["o", "u"], "updated_info": ["u2", "u"]}
    first = update_ordering({"o": 3, "u": None, "u2": 2}, groups)
    assert first is not None and first.updated_in_top5 and first.updated_first is True
    # the original-only turn above every updated one
    late = update_ordering({"o": 1, "u": 7, "u2": None}, groups)
    assert late is not None and not late.updated_in_top5 and late.updated_first is False
    missed = update_ordering({"o": None, "u": None, "u2": None}, groups)
    assert missed is not None and missed.updated_first is False
    # every original turn is also updated: there is nothing to rank above
    same = update_ordering({"u": 1}, {"original_info": ["u"], "updated_info": ["u"]})
    assert same is not None and same.updated_first is None and same.updated_in_top5
    assert update_ordering({"o": 1}, {"original_info": ["o"]}) is None
    summary = ordering_summary([first, late, same])
    assert summary["updated_in_top5"] == pytest.approx(2 / 3, abs=1e-4) and summary["updated_first"] == 0.5
    assert summary["updated_first_questions"] == 2


def test_plain_baselines_rank_the_turn_that_says_it(tmp_path: Path) -> None:
    (conv,) = load_beam(beam_file(tmp_path))
    plain = TurnBaselines(messages_of(conv), HashingEmbedder(256))
    ranked, top = plain.rank_bm25("greyhound Pixel", 3)
    assert ranked[0] == ["6"] and top > 0
    assert plain.rank_bm25("zebra", 3) == ([], 0.0)
    dense, cosine = plain.rank_dense("I adopted a greyhound called Pixel last weekend.", 3)
    assert dense[0] == ["6"] and cosine == pytest.approx(1.0, abs=1e-5)


def test_harness_measures_every_figure(settings: Settings, tmp_path: Path) -> None:
    conversations = load_beam(beam_file(tmp_path))
    report = evaluate(
        conversations, settings, [1, 5], baselines=True, infer=False, categories=list(CATEGORIES)
    )
    # three answerable questions are scored; the abstention question only has a top score
    assert report.questions == 3 and report.unanswerable == 1 and report.unusable_questions == 1
    assert set(report.metrics) == {"memstack", "bm25", "vector", "bm25-turns", "dense-turns"}
    assert report.counts["abstention"] == 0 and report.counts["knowledge_update"] == 1
    for name in report.metrics:
        assert report.abstention[name]["answerable"] == 3 and report.abstention[name]["unanswerable"] == 1
        assert report.knowledge_update[name]["questions"] == 1
        # raw turns: every result brings its own turn
        assert report.metrics[name]["no_new"]["5"]["all"] == 0.0
    # "which port ... Express": the only turn naming Express and a port is found first by plain BM25
    port = next(q for q in report.per_question if q["category"] == "information_extraction")
    assert port["bm25-turns"]["evidence_ranks"] == [1]
    assert report.metrics["bm25-turns"]["turn_recall"]["5"]["information_extraction"] == 1.0
    abstention = next(q for q in report.per_question if not q["answerable"])
    assert "evidence_ranks" not in abstention["memstack"] and "top_score" in abstention["memstack"]
    # The search's own evidence, per question and as an AUROC beside the top score's.
    assert all(0.0 <= q["memstack"]["evidence"] <= 1.0 for q in report.per_question)
    evidence = report.evidence["answerable"]
    assert (evidence["yes"], evidence["no"]) == (3, 1)
    assert evidence["top_score"] == report.abstention["memstack"]["auroc"]
    assert evidence["evidence"] is not None and 0.0 <= evidence["evidence"] <= 1.0
    assert set(report.versus) == {"bm25", "vector", "bm25-turns", "dense-turns"}
    assert set(report.versus["dense-turns"]["5"]) == {"better", "worse"}


def _cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(MEMSTACK_DATA_DIR=str(tmp_path / "data"), MEMSTACK_EMBEDDER="hashing")
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_cli_json_plot_and_embedding_cache(tmp_path: Path) -> None:
    path, png = beam_file(tmp_path), tmp_path / "beam.png"
    proc = _cli(["eval", "beam", str(path), "--json", "--conversations", "1", "--plot", str(png)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["config"]["infer"] is True and report["config"]["conversations"] == 1
    assert report["abstention"]["memstack"]["unanswerable"] == 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the embeddings are kept by model and text for the next run
    assert list((tmp_path / "data" / "eval-cache").glob("embeddings-hashing*.sqlite3"))
    table = _cli(["eval", "beam", str(path), "--raw", "--k", "1,5"], tmp_path)
    assert table.returncode == 0, table.stderr
    for label in (
        "BEAM turn recall@k",
        "dense-turns",
        "bm25-turns",
        "abstention AUROC",
        "update in top 5",
        "memstack evidence",
    ):
        assert label in table.stdout
    bad = _cli(["eval", "beam", str(tmp_path / "missing.json.gz")], tmp_path)
    assert bad.returncode == 1 and "missing.json.gz" in bad.stderr
