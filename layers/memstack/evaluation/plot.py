"""``memstack eval locomo|beam --plot FILE.png``: turn recall@k by category, memstack against its baselines.

matplotlib is a laptop dependency (the ``plot`` extra), imported only
here, with the non-interactive Agg backend so it runs without a display.
"""

from __future__ import annotations

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
    fig.legend(handles, labels, loc="upper right", ncol=len(retrievers), fontsize=8)
    config = report.get("config", {})
    mode = "raw turns" if not config.get("infer") else "extraction on"
    if config.get("consolidate"):
        mode += ", consolidation"
    fig.suptitle(f"{benchmark}, {report.get('questions', 0)} questions ({config.get('embedder')}, {mode})")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
