"""What each optional retrieval technique costs per search, paired on the same questions.

For every LoCoMo question (stores kept by ``memstack eval locomo --store-dir``),
the search runs once with the default settings and once with each option
turned off (``--off NAME:VAR=VALUE,...``), alternating so both see the same
machine load; query vectors are computed once beforehand, so the figures are
the pipeline's own time (the query embedding comes on top). Printed per
variant: median and p95 of the whole search in ms, and the median of the
per-question ratio default / variant.

    python scripts/bench_retrieval_options.py ../shared/data/locomo/locomo-dev.json \\
        --store-dir .cache/stores/infer --cache-dir .cache/emb --off "no-prf:prf_terms=0"
"""

from __future__ import annotations

import argparse
import logging
import statistics
from pathlib import Path

import numpy as np
from memstack.domain.retrieval.pipeline import Retriever
from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.evaluation.locomo import load_locomo
from memstack.evaluation.runner import conversation_services, question_request
from memstack.factory import build_embedder
from memstack.settings import load_settings


class _Fixed:
    """An embedder answering the questions from vectors computed beforehand."""

    def __init__(self, inner: object, vectors: dict[str, np.ndarray]) -> None:
        self.inner, self.vectors = inner, vectors
        self.dim = inner.dim  # type: ignore[attr-defined]
        self.name = inner.name  # type: ignore[attr-defined]

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.vstack([self.vectors[t] for t in texts])


def main() -> None:
    logging.getLogger("memstack").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--store-dir", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--limit", type=int, default=200, help="questions per conversation")
    parser.add_argument("--off", required=True, help="NAME:VAR=VALUE,...;NAME:...")
    args = parser.parse_args()
    base = load_settings()
    model = build_embedder(base)
    embedder = CachedEmbedder(model, args.cache_dir) if args.cache_dir else model
    variants = {}
    for item in filter(None, (p.strip() for p in args.off.split(";"))):
        name, _, assignments = item.partition(":")
        overrides = dict(a.split("=", 1) for a in assignments.split(",") if "=" in a)
        variants[name] = load_settings(**overrides).retrieval
    times: dict[str, list[float]] = {"default": [], **{n: [] for n in variants}}
    ratios: dict[str, list[float]] = {n: [] for n in variants}
    conversations = load_locomo(args.path)
    for conv, service in conversation_services(
        conversations, base, args.store_dir, infer=not args.raw, embedder=embedder
    ):
        questions = [q.text for q in conv.questions][: args.limit]
        fixed = _Fixed(embedder, dict(zip(questions, embedder.embed(questions), strict=True)))
        default = Retriever(service.store, fixed, base.retrieval)  # type: ignore[arg-type]
        others = {n: Retriever(service.store, fixed, c) for n, c in variants.items()}  # type: ignore[arg-type]
        for text in questions:
            req = question_request(conv, text, 50)
            ms = default.search(req).stage_durations["total"]
            times["default"].append(ms)
            for name, retriever in others.items():
                other = retriever.search(req).stage_durations["total"]
                times[name].append(other)
                ratios[name].append(ms / other if other else 1.0)
    for name, values in times.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        median = statistics.median(values)
        line = f"{name}: {len(values)} searches, median {median:.1f} ms, p95 {p95:.1f} ms"
        if name in ratios:
            line += f", default/{name} median ratio {statistics.median(ratios[name]):.3f}"
        print(line)


if __name__ == "__main__":
    main()
