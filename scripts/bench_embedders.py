"""Embedding throughput of the offline models, paired on the same texts (LoCoMo turns or any JSON lines).

Each round embeds the same batch with every model in turn, so all see the same
machine load; printed: texts per second per model (median over rounds) and the
ratio to the first model. Models load before the first round.

    python scripts/bench_embedders.py ../shared/data/locomo/locomo-dev.json --models minilm,mpnet
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from memstack.evaluation.locomo import load_locomo
from memstack.factory import build_embedder
from memstack.settings import load_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--models", default="minilm,mpnet")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    turns = [t.content for c in load_locomo(args.path) for t in c.turns if t.content.strip()]
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    models = {n: build_embedder(load_settings(embedder=n)) for n in names}
    for model in models.values():
        model.embed(turns[:2])  # load the weights
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        batch = turns[r * args.batch : (r + 1) * args.batch]
        for name, model in models.items():
            start = time.perf_counter()
            model.embed(batch)
            rates[name].append(len(batch) / (time.perf_counter() - start))
    first = statistics.median(rates[names[0]])
    for name in names:
        rate = statistics.median(rates[name])
        print(
            f"{name}: {rate:.1f} texts/s (median of {args.rounds} rounds of {args.batch}), "
            f"{first / rate:.2f}x the time of {names[0]}"
        )


if __name__ == "__main__":
    main()
