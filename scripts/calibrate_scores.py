"""Fit the calibrated score of retrieval stage 4 on LoCoMo, checked leave-one-conversation-out.

For every question of every conversation the pipeline's pool (``--pool``
results, ``explain`` on) is collected with its signals (``--features``: by
default the result's scaled RRF and the query's best cosine and coverage;
see memstack.domain.retrieval.calibration) and a label: does the result cite
an evidence turn. A logistic regression
(Newton's method, a small L2 penalty) maps the signals to a probability.

Leave-one-conversation-out: for each conversation, the model is fitted on the
others and judged on it, as a probability (Brier score, and observed
relevance per score bin) and as a ranking: turn recall@k when the pool is
ordered by the fitted score alone, beside the order the pipeline returned.
The fitted order ignores what stages 5-6 do after fusion (a memory taking the
better score of a turn merged into it, the temporal factor), so it is only
comparable between feature sets, not with the pipeline's order. The model
fitted on every conversation is printed last, as the values for
``DEFAULT_SCORE_MODEL`` / ``MEMSTACK_SCORE_*``.

    python scripts/calibrate_scores.py ../shared/data/locomo/locomo-dev.json \\
        --store-dir .cache/stores/infer --cache-dir .cache/emb

Stores are the evaluation's (``memstack eval locomo --store-dir``): kept ones
are reused, so only the searches run. Extraction is on unless ``--raw``.

``--beam FILE --beam-store-dir DIR`` adds BEAM's first ``--beam-conversations``
conversations (``memstack eval beam --store-dir``), abstention questions among
them (every result of one is labelled irrelevant), so the fit sees both
benchmarks; ``--balance`` weighs each benchmark's pairs equally. Each held-out
conversation is then also judged per benchmark, and on BEAM by how well the
fitted top score separates answerable from abstention questions (AUROC).
The pipeline's own scores (the configured model) are judged too: their Brier
score per benchmark, and with ``--plot FILE.png`` a reliability diagram
(docs/images/reliability.png is one).
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
from memstack.evaluation.beam import load_beam
from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.evaluation.locomo import Conversation, load_locomo
from memstack.evaluation.plot import plot_reliability, reliability_bins
from memstack.evaluation.recall import QuestionResult
from memstack.evaluation.runner import conversation_services, question_request
from memstack.evaluation.separation import auroc
from memstack.factory import build_embedder
from memstack.settings import load_settings

FEATURES = ("rrf_scaled", "query_cosine", "query_coverage")


def collect(args: argparse.Namespace, features: tuple[str, ...]) -> list[dict]:
    """Per question: the benchmark, conversation, evidence, and each pooled result's signals and sources."""
    settings = load_settings()
    model = build_embedder(settings)
    embedder = CachedEmbedder(model, args.cache_dir) if args.cache_dir else model
    sets: list[tuple[str, list[Conversation], Path]] = [("locomo", load_locomo(args.path), args.store_dir)]
    if args.beam is not None:
        beam = load_beam(args.beam)[: args.beam_conversations]
        sets.append(("beam", beam, args.beam_store_dir or args.store_dir))
    out = []
    for benchmark, conversations, store_dir in sets:
        services = conversation_services(
            conversations, settings, store_dir, infer=not args.raw, embedder=embedder
        )
        for conv, service in services:
            for q in conv.questions:
                req = question_request(conv, q.text, args.pool, explain=True)
                hits = service.search(req).hits
                out.append(
                    {
                        "benchmark": benchmark,
                        "conversation": f"{benchmark}:{conv.sample_id}",
                        "category": q.category_name,
                        "answerable": q.answerable,
                        "evidence": list(q.evidence),
                        "sessions": {t.dia_id: str(t.session) for t in conv.turns},
                        "features": [[h.stages.get(f, 0.0) for f in features] for h in hits],
                        "sources": [h.record.source_ids for h in hits],
                        "scores": [h.score for h in hits],
                    }
                )
    return out


def fit(
    x: np.ndarray, y: np.ndarray, l2: float = 1e-3, steps: int = 50, weight: np.ndarray | None = None
) -> np.ndarray:
    """Logistic regression weights [bias, *features] by Newton's method (``weight``: per pair)."""
    xb = np.hstack([np.ones((len(x), 1)), x])
    sw = np.ones(len(x)) if weight is None else weight
    w = np.zeros(xb.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (sw * (p - y)) + l2 * np.r_[0.0, w[1:]]
        hess = (xb * (sw * p * (1 - p))[:, None]).T @ xb + l2 * np.diag(np.r_[0.0, np.ones(len(w) - 1)])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(w[0] + x @ w[1:])))


def design(questions: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for q in questions:
        evidence = set(q["evidence"])
        for feats, sources in zip(q["features"], q["sources"], strict=True):
            xs.append(feats)
            ys.append(1.0 if evidence.intersection(sources) else 0.0)
    return np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64)


def pair_weights(questions: list[dict], balance: bool) -> np.ndarray | None:
    """Per pair, so that each benchmark's pairs weigh the same in all (``--balance``), else None."""
    if not balance:
        return None
    counts: dict[str, int] = {}
    for q in questions:
        counts[q["benchmark"]] = counts.get(q["benchmark"], 0) + len(q["features"])
    total = sum(counts.values())
    per = {b: total / (len(counts) * n) for b, n in counts.items()}
    return np.asarray([per[q["benchmark"]] for q in questions for _ in q["features"]], dtype=np.float64)


def top_auroc(questions: list[dict], w: np.ndarray | None) -> float | None:
    """AUROC of each question's top score (fitted, or the pipeline's own) for "it is answerable"."""
    answerable: list[float] = []
    abstention: list[float] = []
    for q in questions:
        if not q["features"]:
            continue
        x = np.asarray(q["features"], dtype=np.float64)
        top = float(predict(w, x).max()) if w is not None else float(q["scores"][0])
        (answerable if q["answerable"] else abstention).append(top)
    if not answerable or not abstention:
        return None
    return auroc(answerable, abstention)


def recall(questions: list[dict], ks: list[int], w: np.ndarray | None) -> dict[int, float]:
    """Mean turn recall@k with each pool ordered by the model (or as the pipeline returned it)."""
    sums = dict.fromkeys(ks, 0.0)
    questions = [q for q in questions if q["evidence"]]  # an abstention question has no recall
    for q in questions:
        sources = q["sources"]
        if w is not None and sources:
            order = np.argsort(-predict(w, np.asarray(q["features"], dtype=np.float64)), kind="stable")
            sources = [sources[i] for i in order]
        res = QuestionResult.from_results(
            q["category"], sources, q["evidence"], lambda t, s=q["sessions"]: s.get(t, t), max(ks)
        )
        for k in ks:
            sums[k] += res.value("turn_recall", k)
    return {k: round(sums[k] / max(len(questions), 1), 4) for k in ks}


def reliability(p: np.ndarray, y: np.ndarray) -> list[tuple[str, int, float]]:
    """(band, results, share relevant) per score band that holds results."""
    bands = reliability_bins(p.tolist(), y.tolist(), (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0))
    return [(f"{b.lo:.2f}-{b.hi:.2f}", b.results, round(b.relevant, 3)) for b in bands]


def pipeline_curves(questions: list[dict]) -> dict[str, tuple[list[float], list[float]]]:
    """Per benchmark: the score the pipeline gave each result, and whether it cites an evidence turn."""
    curves: dict[str, tuple[list[float], list[float]]] = {}
    for q in questions:
        scores, relevant = curves.setdefault(q["benchmark"], ([], []))
        evidence = set(q["evidence"])
        for score, sources in zip(q["scores"], q["sources"], strict=True):
            scores.append(float(score))
            relevant.append(1.0 if evidence.intersection(sources) else 0.0)
    return curves


def main() -> None:
    logging.getLogger("memstack").setLevel(logging.WARNING)  # one log line per search otherwise
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--store-dir", type=Path, required=True)
    parser.add_argument("--cache-dir", type=Path)
    parser.add_argument("--raw", action="store_true", help="turns only (no extraction)")
    parser.add_argument("--pool", type=int, default=100, help="results per question (at most MAX_TOP_K)")
    parser.add_argument("--dump", type=Path, help="also write the collected signals as JSON here")
    parser.add_argument("--load", type=Path, help="fit on signals --dump wrote (no searches)")
    parser.add_argument("--beam", type=Path, help="also fit on this BEAM file's conversations")
    parser.add_argument("--beam-store-dir", type=Path, help="BEAM's kept stores (default: --store-dir)")
    parser.add_argument("--beam-conversations", type=int, default=3, help="BEAM's first N conversations")
    parser.add_argument("--balance", action="store_true", help="weigh each benchmark's pairs equally")
    parser.add_argument(
        "--plot", type=Path, help="write a reliability diagram (PNG): the pipeline's scores per benchmark"
    )
    parser.add_argument(
        "--features",
        default=",".join(FEATURES),
        help="stage signals to fit on (e.g. rrf_scaled,cosine,coverage,category: per-result ones re-order)",
    )
    args = parser.parse_args()
    features = tuple(f.strip() for f in args.features.split(",") if f.strip())
    questions = json.loads(args.load.read_text()) if args.load else collect(args, features)
    if args.dump:
        args.dump.write_text(json.dumps(questions))
    ks = [5, 10, 25]
    names = sorted({q["conversation"] for q in questions})
    print(f"{len(questions)} questions, {len(names)} conversations; features {features}")
    held_out: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for held in names:
        train = [q for q in questions if q["conversation"] != held]
        test = [q for q in questions if q["conversation"] == held]
        w = fit(*design(train), weight=pair_weights(train, args.balance))
        x, y = design(test)
        p = predict(w, x)
        held_out.setdefault(test[0]["benchmark"], []).append((p, y))
        print(
            f"held out {held}: pipeline order {recall(test, ks, None)}  "
            f"fitted score alone {recall(test, ks, w)}  "
            f"brier {float(np.mean((p - y) ** 2)):.4f}  weights {np.round(w, 3).tolist()}"
        )
    for benchmark, parts in held_out.items():
        p = np.concatenate([part[0] for part in parts])
        y = np.concatenate([part[1] for part in parts])
        print(
            f"{benchmark}, each conversation held out: brier {float(np.mean((p - y) ** 2)):.4f}; "
            f"share relevant per score bin: {reliability(p, y)}"
        )
    w = fit(*design(questions), weight=pair_weights(questions, args.balance))
    x, y = design(questions)
    print("all: pipeline order", recall(questions, ks, None), "fitted order", recall(questions, ks, w))
    print("share relevant per fitted-score bin (bin, results, share):", reliability(predict(w, x), y))
    for benchmark in sorted({q["benchmark"] for q in questions}):
        mine = [q for q in questions if q["benchmark"] == benchmark]
        print(
            f"{benchmark}: top-score AUROC answerable vs abstention: fitted {top_auroc(mine, w)}, "
            f"pipeline {top_auroc(mine, None)}"
        )
    curves = pipeline_curves(questions)
    for benchmark, (scores, relevant) in sorted(curves.items()):
        brier = float(np.mean((np.asarray(scores) - np.asarray(relevant)) ** 2))
        print(f"{benchmark}: the pipeline's own scores (the configured model): brier {brier:.4f}")
    if args.plot is not None:
        plot_reliability(curves, args.plot, "memstack scores against relevance")
        print(f"reliability diagram written to {args.plot}")
    print(
        "weights (bias first):",
        ", ".join(f"{n}={v:.3f}" for n, v in zip(("bias", *features), w, strict=True)),
    )


if __name__ == "__main__":
    main()
