"""Plots: ``memstack eval locomo|beam --plot FILE.png`` (turn recall@k by category, memstack against its
baselines) and the reliability diagram of ``scripts/calibrate_scores.py --plot``.

matplotlib is a laptop dependency (the ``plot`` extra), imported only
here, with the non-interactive Agg backend so it runs without a display.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LABELS = {
    "memstack": "memstack",
    "bm25": "BM25 stage only",
    "vector": "vector stage only",
    "bm25-turns": "plain BM25 (raw turns)",
    "dense-turns": "plain dense (raw turns)",
}


def plot_recall(report: dict[str, Any], path: Path, categories: list[str], benchmark: str = "LoCoMo") -> None:
    """One panel per k: grouped bars of turn recall@k per category, one bar per retriever of the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = report["metrics"]
    retrievers = [r for r in LABELS if r in metrics]
    ks = list(metrics["memstack"]["turn_recall"])
    counts = report.get("counts", {})
    groups = [g for g in ["all", *categories] if counts.get(g)]
    # Long category names (BEAM's ten) need room: wider panels, slanted labels.
    wide = len(groups) > 6
    size = (0.9 * len(groups) + 1.5 if wide else 5.2) * len(ks), 5.2 if wide else 4.4
    fig, axes = plt.subplots(1, len(ks), figsize=size, sharey=True, squeeze=False)
    width = 0.8 / len(retrievers)
    for ax, k in zip(axes[0], ks, strict=True):
        for i, name in enumerate(retrievers):
            row = metrics[name]["turn_recall"][k]
            values = [row.get(g) or 0.0 for g in groups]
            xs = [x + (i - (len(retrievers) - 1) / 2) * width for x in range(len(groups))]
            bars = ax.bar(xs, values, width, label=LABELS[name])
            if name == "memstack":
                ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=1)
        ax.set_title(f"turn recall@{k}")
        ax.set_xticks(range(len(groups)))
        labels = [f"{g.replace('_', ' ')}\n(n={counts.get(g, 0)})" for g in groups]
        ax.set_xticklabels(
            labels, fontsize=7 if wide else 8, rotation=35 if wide else 0, ha="right" if wide else "center"
        )
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share of evidence turns found")
    handles, labels = axes[0][0].get_legend_handles_labels()
    # Below the panels: at the top right the legend ran over the title.
    fig.legend(handles, labels, loc="lower center", ncol=len(retrievers), fontsize=8, frameon=False)
    config = report.get("config", {})
    mode = "raw turns" if not config.get("infer") else "extraction on"
    if config.get("consolidate"):
        mode += ", consolidation"
    fig.suptitle(f"{benchmark}, {report.get('questions', 0)} questions ({config.get('embedder')}, {mode})")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


#: score bins of the reliability plot (the last one closed at 1)
RELIABILITY_EDGES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1.0)


@dataclass(frozen=True)
class ScoreBin:
    """The results whose score falls in [lo, hi): how many, their mean score, the share relevant."""

    lo: float
    hi: float
    results: int
    mean_score: float
    relevant: float


def reliability_bins(
    scores: Sequence[float], relevant: Sequence[float], edges: Sequence[float] = RELIABILITY_EDGES
) -> list[ScoreBin]:
    """Per score bin that holds results: its mean score and share relevant (the last bin includes its end)."""
    out = []
    last = len(edges) - 2
    pairs = list(zip(scores, relevant, strict=True))
    for i, (lo, hi) in enumerate(itertools.pairwise(edges)):
        inside = [(s, r) for s, r in pairs if lo <= s < hi or (i == last and s == hi)]
        if inside:
            n = len(inside)
            out.append(ScoreBin(lo, hi, n, sum(s for s, _ in inside) / n, sum(r for _, r in inside) / n))
    return out


def plot_reliability(
    curves: dict[str, tuple[Sequence[float], Sequence[float]]], path: Path, title: str
) -> None:
    """A reliability diagram: per score bin, the share of results that are relevant against the mean score.

    ``curves`` maps a label (a benchmark) to (scores, 1.0/0.0 relevant) of every (question, result) pair.
    A calibrated score lies on the diagonal; each point is labelled with how many results its bin holds.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 5.0))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="calibrated")
    for label, (scores, relevant) in curves.items():
        bins = reliability_bins(scores, relevant)
        ax.plot(
            [b.mean_score for b in bins],
            [b.relevant for b in bins],
            marker="o",
            label=f"{label} ({len(scores):,} results)",
        )
        for b in bins:
            where = (b.mean_score, b.relevant)
            ax.annotate(f"{b.results:,}", where, textcoords="offset points", xytext=(4, -10), fontsize=6)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("score (mean in its bin)")
    ax.set_ylabel("share of results citing an evidence turn")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
