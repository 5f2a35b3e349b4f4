"""``memstack bench search`` runs end to end on a tiny store (figures are printed, never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memstack.bench.corpus import Corpus
from memstack.bench.floor import Floor
from memstack.cli import app
from typer.testing import CliRunner


def test_the_corpus_is_the_same_on_every_run() -> None:
    first, second = Corpus(), Corpus()
    assert [m.content for m in first.messages(5)] == [m.content for m in second.messages(5)]
    assert first.queries(3) == second.queries(3)
    assert len({m.id for m in first.messages(50, offset=10)}) == 50


def test_bench_search_reports_every_size_and_draws_the_plot(tmp_path: Path) -> None:
    plot = tmp_path / "scale.png"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "search",
            "--memories",
            "30,60",
            "--users",
            "2",
            "--queries",
            "4",
            "--json",
            "--plot",
            str(plot),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert [p["memories"] for p in report["points"]] == [30, 60]
    for point in report["points"]:
        assert set(point["latency_ms"]) == {"p50", "p95", "p99"}
        assert point["floor_ms"]["p50"] > 0 and point["ratio_p50"] > 0
        assert point["shared_over_alone_p50"] is not None
        assert {"vector", "bm25", "fusion"} <= set(point["stages_p50_ms"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_search_refuses_bad_sizes() -> None:
    result = CliRunner().invoke(app, ["bench", "search", "--memories", "ten"])
    assert result.exit_code != 0


@pytest.mark.parametrize("query", ["", "???", "the a of"])
def test_the_floor_answers_any_query(query: str) -> None:
    import numpy as np

    floor = Floor(np.eye(4, dtype=np.float32), ["tea", "coffee", "the tea", "a"], k=2)
    try:
        assert floor.search(np.ones(4, dtype=np.float32) / 2, query) >= 0
        assert 0 <= floor.match_fraction(query) <= 1
    finally:
        floor.close()
