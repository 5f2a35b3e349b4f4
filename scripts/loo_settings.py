"""Leave-one-conversation-out check of retrieval settings tuned on LoCoMo.

Each candidate setting (``--grid``: ``NAME:VAR=VALUE,VAR=VALUE;...`` with
``MEMSTACK_*`` names, lower-case, without the prefix) is evaluated on every
conversation through the product's pipeline (``memstack.evaluation.runner``,
stores kept in ``--store-dir`` and reused). Then, for each conversation, the
setting with the best mean turn recall@10 + @25 on the *other* conversations
is chosen, and its figures on the held-out one are what is reported: the
recall a user would get from settings tuned on conversations other than
theirs. Printed: every setting's per-conversation recall, the choice per
fold, and the leave-one-out means beside the in-sample best.

    python scripts/loo_settings.py ../shared/data/locomo/locomo-dev.json \\
        --store-dir .cache/stores/infer --cache-dir .cache/emb \\
        --grid "default:;paper-k:rrf_k=10,weight_vector=0.4,weight_bm25=0.6;no-prf:prf_terms=0"
"""

from __future__ import annotations

import argparse
import logging
from collections import Counter
from pathlib import Path

from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.evaluation.locomo import load_locomo
from memstack.evaluation.runner import evaluate
from memstack.factory import build_embedder
from memstack.settings import load_settings

KS = (5, 10, 25)


def parse_grid(text: str) -> dict[str, dict[str, str]]:
    grid: dict[str, dict[str, str]] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        name, _, assignments = item.partition(":")
        grid[name.strip()] = dict(
            (k.strip(), v.strip()) for k, v in (a.split("=", 1) for a in assignments.split(",") if "=" in a)
        )
    return grid


def per_conversation(report_questions: list[dict], k: int) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for q in report_questions:
        ranks = q["memstack"]["evidence_ranks"]
        found = sum(1 for r in ranks if r is not None and r <= k) / len(ranks)
        sums.setdefault(q["conversation"], []).append(found)
    return {c: sum(v) / len(v) for c, v in sums.items()}


def main() -> None:
    logging.getLogger("memstack").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--store-dir", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--raw", action="store_true")
    parser.add_argument("--grid", required=True)
    args = parser.parse_args()
    conversations = load_locomo(args.path)
    base = load_settings()
    model = build_embedder(base)
    embedder = CachedEmbedder(model, args.cache_dir) if args.cache_dir else model
    results: dict[str, dict[int, dict[str, float]]] = {}
    counts: dict[str, int] = {}
    for name, overrides in parse_grid(args.grid).items():
        settings = load_settings(**overrides)
        report = evaluate(
            conversations, settings, KS, infer=not args.raw, embedder=embedder, store_dir=args.store_dir
        )
        results[name] = {k: per_conversation(report.per_question, k) for k in KS}
        counts = dict(Counter(q["conversation"] for q in report.per_question))
        print(name, overrides, {k: {c: round(v, 3) for c, v in r.items()} for k, r in results[name].items()})
    convs = sorted(counts)

    def mean(name: str, k: int, among: list[str]) -> float:
        total = sum(counts[c] for c in among)
        return sum(results[name][k][c] * counts[c] for c in among) / total

    loo = dict.fromkeys(KS, 0.0)
    for held in convs:
        others = [c for c in convs if c != held]
        best = max(results, key=lambda n: mean(n, 10, others) + mean(n, 25, others))
        print(f"held out {held}: chose {best!r} on the others")
        for k in KS:
            loo[k] += results[best][k][held] * counts[held]
    total = sum(counts.values())
    print("leave-one-out:", {k: round(v / total, 4) for k, v in loo.items()})
    for name in results:
        print(f"in-sample {name!r}:", {k: round(mean(name, k, convs), 4) for k in KS})


if __name__ == "__main__":
    main()
