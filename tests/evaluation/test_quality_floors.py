"""Quality floors: LoCoMo dev and BEAM recall and the extraction pass rates, in the default configuration.

These fail CI when a change loses a real share of quality, and only then. Each
floor sits a margin below the figure measured when it was set (written beside
it, with the command that gives it), so a ranking or extraction change that
moves quality by a question or two passes without re-recording anything, and
one that costs several points fails. When a change lifts a figure for good,
raise its floor in the same commit. The rankings' exact order is the golden
file's job (``tests/retrieval/test_ranking_golden.py``), not this one's.

The subset is small so the floors run in a few minutes on a loaded machine: the
first LoCoMo dev conversation (197 questions), the first two BEAM 500K
conversations (35 answerable questions over 1,676 raw turns, no extraction:
long user-assistant chats, a different retrieval than LoCoMo's) and the dev and
held-out extraction scenarios (178).
The benchmark files are read where they live (never copied into the
repository): ``../shared/data/locomo/locomo-dev.json`` and
``../shared/data/beam/beam-500k.json.gz`` beside the checkout, or the paths in
``LOCOMO_DEV`` and ``BEAM_DEV``; a floor whose file is absent is skipped, saying so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from memstack.evaluation import beam
from memstack.evaluation.extraction import ExtractionReport, evaluate_extraction
from memstack.evaluation.locomo import load_locomo
from memstack.evaluation.runner import EvalReport, evaluate
from memstack.evaluation.scenarios import load_scenarios
from memstack.factory import build_embedder
from memstack.ports.embedder import Embedder
from memstack.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
LOCOMO_DEV = Path(os.environ.get("LOCOMO_DEV") or ROOT.parent / "shared/data/locomo/locomo-dev.json")
BEAM_DEV = Path(os.environ.get("BEAM_DEV") or ROOT.parent / "shared/data/beam/beam-500k.json.gz")
SCENARIOS = ROOT / "examples" / "extraction"

#: LoCoMo dev, first conversation, extraction on, default settings: turn recall@k over all questions.
#: Measured 0.823 @10 and 0.911 @25 (``memstack eval locomo locomo-dev.json --limit 1``, 1 December 2026).
RECALL_FLOORS = {10: 0.77, 25: 0.86}
#: BEAM 500K, first two conversations, raw turns (no extraction), default settings: turn recall@k over
#: their 35 answerable questions. Measured 0.422 @10 and 0.558 @25 (``memstack eval beam
#: beam-500k.json.gz --conversations 2 --raw --no-baselines --no-cache``, 3 December 2026; 200 s CPU).
BEAM_FLOORS = {10: 0.37, 25: 0.50}
#: Extraction pass rate per file with the offline extractor (``make eval-extraction``).
#: Measured 99.3% on dev.jsonl (146 scenarios) and 100% on heldout.jsonl (32).
PASS_RATE_FLOORS = {"dev.jsonl": 0.95, "heldout.jsonl": 0.90}

pytestmark = pytest.mark.slow  # loads the default embedding model


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The defaults, as a user gets them (no embedder or model override)."""
    return load_settings(data_dir=tmp_path_factory.mktemp("floors"), storage_reserve_bytes=0)


@pytest.fixture(scope="module")
def embedder(settings: Settings) -> Iterator[Embedder]:
    yield build_embedder(settings)  # loaded once for both evaluations


@pytest.fixture(scope="module")
def locomo(settings: Settings, embedder: Embedder) -> EvalReport:
    if not LOCOMO_DEV.is_file():
        pytest.skip(f"LoCoMo dev data not found at {LOCOMO_DEV} (set LOCOMO_DEV to its path)")
    conversations = load_locomo(LOCOMO_DEV)[:1]
    return evaluate(conversations, settings, sorted(RECALL_FLOORS), baselines=True, embedder=embedder)


@pytest.fixture(scope="module")
def beam_raw(settings: Settings, embedder: Embedder) -> EvalReport:
    if not BEAM_DEV.is_file():
        pytest.skip(f"BEAM data not found at {BEAM_DEV} (set BEAM_DEV to its path)")
    conversations = beam.load_beam(BEAM_DEV)[:2]
    return evaluate(
        conversations,
        settings,
        sorted(BEAM_FLOORS),
        infer=False,
        embedder=embedder,
        categories=list(beam.CATEGORIES),
    )


@pytest.fixture(scope="module")
def extraction(settings: Settings, embedder: Embedder) -> ExtractionReport:
    scenarios = load_scenarios([SCENARIOS / name for name in PASS_RATE_FLOORS])
    return evaluate_extraction(scenarios, settings, embedder=embedder)


@pytest.mark.parametrize("k", sorted(RECALL_FLOORS))
def test_locomo_recall_stays_above_its_floor(locomo: EvalReport, k: int) -> None:
    recall = locomo.recall[str(k)]["all"]
    assert recall is not None and recall >= RECALL_FLOORS[k], (
        f"LoCoMo dev turn recall@{k} fell to {recall} (floor {RECALL_FLOORS[k]})"
    )


@pytest.mark.parametrize("k", sorted(RECALL_FLOORS))
def test_the_pipeline_beats_its_best_single_stage(locomo: EvalReport, k: int) -> None:
    """The design's rule for a default: fusion earns its place over BM25 alone and vectors alone."""
    pipeline = locomo.recall[str(k)]["all"]
    singles = {name: table[str(k)]["all"] for name, table in locomo.baselines.items()}
    assert singles and pipeline is not None
    best = max(singles, key=lambda name: singles[name] or 0.0)
    assert pipeline > (singles[best] or 0.0), f"recall@{k}: pipeline {pipeline}, {best} alone {singles[best]}"


@pytest.mark.parametrize("k", sorted(BEAM_FLOORS))
def test_beam_recall_stays_above_its_floor(beam_raw: EvalReport, k: int) -> None:
    recall = beam_raw.recall[str(k)]["all"]
    assert recall is not None and recall >= BEAM_FLOORS[k], (
        f"BEAM turn recall@{k} (raw turns) fell to {recall} (floor {BEAM_FLOORS[k]})"
    )


@pytest.mark.parametrize("name", sorted(PASS_RATE_FLOORS))
def test_extraction_pass_rate_stays_above_its_floor(extraction: ExtractionReport, name: str) -> None:
    rate = extraction.by_file[name]
    failed = [r.id for r in extraction.results if not r.passed and r.source == name]
    assert rate["rate"] >= PASS_RATE_FLOORS[name], (
        f"{name}: {rate['passed']}/{rate['n']} pass (floor {PASS_RATE_FLOORS[name]}); failing: {failed}"
    )


def test_no_extraction_job_fails(extraction: ExtractionReport) -> None:
    assert extraction.failed_jobs == 0
