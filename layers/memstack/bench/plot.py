"""``--plot FILE.png``: the scale curve of ``memstack bench search`` (matplotlib, laptop only).

matplotlib is the ``plot`` extra: it is not in the Lambda layer.
"""

from __future__ import annotations

from pathlib import Path

from memstack.bench.search import SearchReport


def plot_search(report: SearchReport, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    sizes = [p.memories for p in report.points]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    ax.plot(sizes, [p.latency_ms["p50"] for p in report.points], "o-", label="memstack p50")
    ax.plot(sizes, [p.latency_ms["p95"] for p in report.points], "o--", label="memstack p95")
    ax.plot(sizes, [p.floor_ms["p50"] for p in report.points], "s-", color="grey", label="floor p50")
    for p in report.points:
        ax.annotate(
            f"{p.ratio_p50:.1f}x",
            (p.memories, p.latency_ms["p50"]),
            textcoords="offset points",
            xytext=(6, -12),
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories per user")
    ax.set_ylabel("search latency (ms)")
    m = report.machine
    ax.set_title(
        f"memstack search vs floor ({report.config['embedder']} embedder, {report.config['users']} user(s); "
        f"{m['cpus']} cores, load {'/'.join(str(x) for x in m['load_average'])})",
        fontsize=9,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
