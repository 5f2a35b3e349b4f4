"""`memstack eval locomo` end to end on the tiny hand-written fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from memstack.evaluation.locomo import load_locomo
from memstack.evaluation.runner import evaluate, ingest_code_digest
from memstack.settings import Settings

BIN = Path(sys.executable).with_name("memstack")
FIXTURE = Path(__file__).parent.parent / "fixtures" / "locomo-tiny.json"
CATEGORIES = {"all", "single-hop", "multi-hop", "temporal", "open-domain", "adversarial"}


def run(args: list[str], tmp_path: Path, **extra_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(MEMSTACK_DATA_DIR=str(tmp_path / "data"), MEMSTACK_EMBEDDER="hashing", **extra_env)
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_json_report_has_every_k_and_category(tmp_path: Path) -> None:
    proc = run(["eval", "locomo", str(FIXTURE), "--json", "--baselines", "--k", "1,3"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["questions"] == 6
    assert set(report["recall"]) == {"1", "3"} and set(report["recall"]["3"]) == CATEGORIES
    # memstack's own stages alone, and the plain baselines over the raw turns
    assert set(report["baselines"]) == {"bm25", "vector", "bm25-turns", "dense-turns"}
    assert set(report["metrics"]) == {"memstack", "bm25", "vector", "bm25-turns", "dense-turns"}
    metrics = {"turn_recall", "any", "all", "ndcg", "session_recall", "cited", "no_new"}
    assert set(report["metrics"]["memstack"]) == metrics
    assert report["metrics"]["memstack"]["turn_recall"] == report["recall"]
    # The default ingest is the product's: extraction ran, so LTM memories exist beside the turns.
    assert report["config"]["infer"] is True and report["stored"]["stm"] == 8
    assert report["stored"].get("ltm_extracted", 0) > 0
    # Every question's evidence ranks are kept, per retriever.
    assert len(report["per_question"]) == 6
    first = report["per_question"][0]
    assert {"conversation", "category", "question", "evidence", "memstack", "bm25", "vector"} <= set(first)
    assert len(first["memstack"]["evidence_ranks"]) == len(first["evidence"])
    assert (
        report["config"]["embedder"] == "hashing" and report["config"]["rrf_k"] == Settings().retrieval.rrf_k
    )
    assert report["unusable_questions"] == 1 and report["dropped_evidence"] == 1
    assert set(report["stage_ms_median"]) >= {
        "query_analysis",
        "vector",
        "bm25",
        "rerank",
        "history",
        "total",
    }
    assert all(0.0 <= v <= 1.0 for row in report["recall"].values() for v in row.values())
    # Recall only grows with k.
    assert report["recall"]["3"]["all"] >= report["recall"]["1"]["all"]
    # The store is temporary: nothing is left in the user's data directory.
    assert not (tmp_path / "data").exists()


def test_table_output(tmp_path: Path) -> None:
    proc = run(["eval", "locomo", str(FIXTURE), "--baselines"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    for label in ("memstack", "bm25-only", "vector-only", "dense-turns", "single-hop", "adversarial"):
        assert label in proc.stdout
    ks = [line.split("│")[2].strip() for line in proc.stdout.splitlines() if "│ memstack" in line]
    # once in the recall table, once in the table of every metric
    assert ks == ["5", "10", "25"] * 2
    for label in ("session recall", "NDCG", "turns cited", "extraction on"):
        assert label in proc.stdout


def test_raw_ingest_plot_and_kept_stores(tmp_path: Path) -> None:
    stores, png = tmp_path / "stores", tmp_path / "recall.png"
    args = ["eval", "locomo", str(FIXTURE), "--json", "--raw", "--baselines", "--store-dir", str(stores)]
    proc = run([*args, "--plot", str(png), "--cache-dir", str(tmp_path / "cache")], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["config"]["infer"] is False and report["stored"] == {"stm": 8}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    marker = stores / "tiny-1" / "ingest.json"
    assert json.loads(marker.read_text())["infer"] is False
    # The second run reuses the kept store (a re-ingest would start from an empty directory).
    sentinel = stores / "tiny-1" / "sentinel"
    sentinel.write_text("kept")
    again = json.loads(run(args, tmp_path).stdout)
    assert again["recall"] == report["recall"] and again["stored"] == {"stm": 8}
    assert sentinel.exists()
    # A store an older extractor kept (another code digest in its marker): rebuilt, not reused.
    kept = json.loads(marker.read_text())
    assert kept["code"] == ingest_code_digest()
    marker.write_text(json.dumps({**kept, "code": "an older extractor"}))
    assert run(args, tmp_path).returncode == 0
    assert not sentinel.exists() and json.loads(marker.read_text())["code"] == ingest_code_digest()
    sentinel.write_text("kept")
    # Other ingest settings: the store is rebuilt.
    proc = run([*args[:-2], "--store-dir", str(stores)], tmp_path, MEMSTACK_INDEX_CONTEXT_TURNS="0")
    assert proc.returncode == 0, proc.stderr
    assert not sentinel.exists() and json.loads(marker.read_text())["indexing"]["context_turns"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--k", "ten"], "--k must be comma-separated whole numbers"),
        (["--k", "0"], "at least one value, each 1 or more"),
        (["--k", "500"], "at most 100"),
        (["--plot", "out.svg"], "--plot writes a PNG"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run(["eval", "locomo", str(FIXTURE), *args], tmp_path)
    assert proc.returncode == 2 and message in proc.stderr


def test_missing_or_malformed_file(tmp_path: Path) -> None:
    proc = run(["eval", "locomo", str(tmp_path / "nope.json")], tmp_path)
    assert proc.returncode == 1 and "nope.json" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    proc = run(["eval", "locomo", str(bad)], tmp_path)
    assert proc.returncode == 2 and "missing" in proc.stderr


def test_each_question_is_answered_from_its_own_conversation(settings: Settings) -> None:
    """On the fixture the obvious turns must be found: a wrong pipeline scores lower."""
    conversations = load_locomo(FIXTURE)
    report = evaluate(conversations, settings, [1, 5], baselines=True)
    assert report.questions == 6 and report.counts["single-hop"] == 2
    # The greyhound turn is the only one that mentions a greyhound.
    assert report.recall["5"]["single-hop"] == 1.0
    assert (report.recall["5"]["all"] or 0.0) >= 0.9


def test_ingest_code_digest_follows_the_extractor_not_the_ranking(tmp_path: Path) -> None:
    """Kept stores are keyed by the ingest code: an extractor rule changes the digest, a ranking
    stage does not (a ranking experiment reuses the stores it was built on)."""
    rules = tmp_path / "adapters" / "llm" / "rules"
    stages = tmp_path / "domain" / "retrieval" / "stages"
    for folder in (rules, stages):
        folder.mkdir(parents=True)
    (rules / "clauses.py").write_text("JOIN = True\n")
    (stages / "dedup.py").write_text("PLACES = 5\n")
    first = ingest_code_digest(tmp_path)
    (stages / "dedup.py").write_text("PLACES = 8\n")
    assert ingest_code_digest(tmp_path) == first
    (rules / "clauses.py").write_text("JOIN = False\n")
    assert ingest_code_digest(tmp_path) != first
    # Consolidation's code counts only for a store built with it.
    consolidation = tmp_path / "domain" / "consolidation"
    consolidation.mkdir(parents=True)
    (consolidation / "job.py").write_text("GROUP = 20\n")
    second, with_consolidation = ingest_code_digest(tmp_path), ingest_code_digest(tmp_path, consolidate=True)
    (consolidation / "job.py").write_text("GROUP = 10\n")
    assert ingest_code_digest(tmp_path) == second
    assert ingest_code_digest(tmp_path, consolidate=True) != with_consolidation


def test_one_add_per_turn_is_its_own_store_and_links_as_one_add_per_session(tmp_path: Path) -> None:
    stores = tmp_path / "stores"
    args = ["eval", "locomo", str(FIXTURE), "--json", "--raw", "--store-dir", str(stores)]
    batched = json.loads(run(args, tmp_path).stdout)
    proc = run([*args, "--add-per-turn"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    per_turn = json.loads(proc.stdout)
    assert per_turn["config"]["per_turn"] is True and batched["config"]["per_turn"] is False
    marker = json.loads((stores / "tiny-1" / "ingest.json").read_text())
    assert marker["per_turn"] is True  # another store: a batched run rebuilds it
    # The same turns, linked to the same neighbours across the adds: the same ranking.
    assert per_turn["stored"] == batched["stored"] and per_turn["recall"] == batched["recall"]
    ranks = [q["memstack"]["evidence_ranks"] for q in per_turn["per_question"]]
    assert ranks == [q["memstack"]["evidence_ranks"] for q in batched["per_question"]]
