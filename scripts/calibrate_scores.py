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

``--evidence SIGNALS`` (or ``each``) measures an evidence factor instead: per
query, a logistic model of "the first ``--evidence-k`` results hold evidence"
from what the query found at all (explain's ``query_*`` signals, among them
``query_idf_coverage``: the share of the query's idf mass in words the store
holds, from the store's own document frequencies), times a model of the
result's relevance given that they do; each conversation held out, it prints
the Brier score, the top score's AUROC for "answerable", "the first result is
right" and "not adversarial", and the factor's own AUROC (the factor alone is
the search's ``evidence``: ``--evidence query_turn_cosine,query_idf_coverage``
fits ``retrieval.evidence.DEFAULT_EVIDENCE_MODEL``; docs/retrieval.md).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from memstack.domain.retrieval import columns as col
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
#: what each query found at all (the same for each of its results): the evidence factor's candidates
QUERY_SIGNALS = (
    col.QUERY_COSINE,
    col.QUERY_COVERAGE,
    col.QUERY_TURN_COSINE,
    col.QUERY_COSINE_MARGIN,
    col.QUERY_BM25_TOP,
    col.QUERY_BM25_MARGIN,
    col.QUERY_IDF_COVERAGE,
)


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
                result = service.search(req)
                hits = result.hits
                query = {name: hits[0].stages.get(name, 0.0) if hits else 0.0 for name in QUERY_SIGNALS}
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
                        "query": query,
                        "evidence_p": result.evidence,
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


def answered(q: dict, k: int) -> bool:
    """Whether one of the question's first ``k`` results cites an evidence turn (never for abstention)."""
    evidence = set(q["evidence"])
    return any(evidence.intersection(sources) for sources in q["sources"][:k])


def query_signals(questions: list[dict], signals: tuple[str, ...]) -> np.ndarray:
    """One row per question: its query signals (the same for each of its results)."""
    x = np.asarray([[q["query"][name] for name in signals] for q in questions], dtype=np.float64)
    return x.reshape(len(questions), len(signals))


def query_weights(questions: list[dict], balance: bool) -> np.ndarray | None:
    """Per question, so that each benchmark's questions weigh the same in all (``--balance``), else None."""
    if not balance:
        return None
    counts = Counter(q["benchmark"] for q in questions)
    per = {b: len(questions) / (len(counts) * n) for b, n in counts.items()}
    return np.asarray([per[q["benchmark"]] for q in questions], dtype=np.float64)


def relative_signals(q: dict) -> np.ndarray:
    """Per result: its scaled RRF over the query's best (1 for the first), and the log of its place."""
    rrf = np.asarray([f[0] for f in q["features"]], dtype=np.float64)
    best = rrf.max() if len(rrf) else 0.0
    return np.stack([rrf / best if best > 0 else rrf, np.log(np.arange(1, len(rrf) + 1))], axis=1)


@dataclass
class Factored:
    """A result's score as P(relevant | the first ``k`` results hold evidence) times the evidence factor
    P(they do | the query's signals): a logistic model of each, the first fitted on the questions whose
    first ``k`` results hold evidence, the second on every question.

    ``relative``: the first model sees only how a result stands within its query (``relative_signals``),
    so the first result's score is the factor times a constant; else the calibrated score's own signals.
    """

    result: np.ndarray
    evidence: np.ndarray
    signals: tuple[str, ...]
    relative: bool

    @classmethod
    def fitted(
        cls, questions: list[dict], signals: tuple[str, ...], k: int, relative: bool, balance: bool
    ) -> Factored:
        found = [q for q in questions if answered(q, k)]
        x = np.vstack([cls.result_signals(q, relative) for q in found])
        result = fit(x, design(found)[1], weight=pair_weights(found, balance))
        y = np.asarray([answered(q, k) for q in questions], dtype=np.float64)
        evidence = fit(query_signals(questions, signals), y, weight=query_weights(questions, balance))
        return cls(result, evidence, signals, relative)

    @staticmethod
    def result_signals(q: dict, relative: bool) -> np.ndarray:
        return relative_signals(q) if relative else np.asarray(q["features"], dtype=np.float64)

    def scores(self, q: dict) -> np.ndarray:
        factor = predict(self.evidence, query_signals([q], self.signals))[0]
        return predict(self.result, self.result_signals(q, self.relative)) * factor


def evidence_report(
    questions: list[dict], signals: tuple[str, ...], k: int, relative: bool, balance: bool
) -> dict[str, dict]:
    """Each conversation held out: per benchmark, the Brier score of the factored model over every
    (question, result) pair, and the AUROC of each question's top score for "answerable" (BEAM),
    "the first result is right" and "not adversarial" (LoCoMo)."""
    scored: dict[str, list[tuple[dict, np.ndarray]]] = {}
    factor: dict[int, float] = {}  # per question (by id): the held-out evidence factor alone
    for held in sorted({q["conversation"] for q in questions}):
        train = [q for q in questions if q["conversation"] != held]
        model = Factored.fitted(train, signals, k, relative, balance)
        for q in questions:
            if q["conversation"] == held:
                scored.setdefault(q["benchmark"], []).append((q, model.scores(q)))
                factor[id(q)] = float(predict(model.evidence, query_signals([q], signals))[0])
    report = {}
    for benchmark, pairs in sorted(scored.items()):
        p = np.concatenate([s for _, s in pairs])
        y = np.concatenate([design([q])[1] for q, _ in pairs])
        tops = [(q, float(s[0])) for q, s in pairs]
        report[benchmark] = {
            "brier": round(float(np.mean((p - y) ** 2)), 4),
            "answerable": _auroc_by(tops, lambda q: q["answerable"]),
            "first_right": _auroc_by(tops, lambda q: answered(q, 1)),
            "not_adversarial": _auroc_by(tops, lambda q: q["category"] != "adversarial"),
            # the factor alone, as a per-search probability beside the scores (``evidence``)
            "factor_answerable": _auroc_by([(q, factor[id(q)]) for q, _ in pairs], lambda q: q["answerable"]),
            f"factor_evidence_in_{k}": _auroc_by(
                [(q, factor[id(q)]) for q, _ in pairs], lambda q: answered(q, k)
            ),
        }
    return report


def _auroc_by(tops: list[tuple[dict, float]], positive: Callable[[dict], bool]) -> float | None:
    value = auroc([t for q, t in tops if positive(q)], [t for q, t in tops if not positive(q)])
    return None if value is None else round(value, 3)


def evidence_main(questions: list[dict], args: argparse.Namespace) -> None:
    """``--evidence``: each query signal alone (unfitted), then the evidence factor fitted on each alone
    and on all together, each conversation held out."""
    questions = [q for q in questions if q["features"]]
    signals = QUERY_SIGNALS if args.evidence == "each" else tuple(args.evidence.split(","))
    k = args.evidence_k
    for benchmark in sorted({q["benchmark"] for q in questions}):
        mine = [q for q in questions if q["benchmark"] == benchmark]
        for name in signals:
            tops = [(q, float(q["query"][name])) for q in mine]
            print(
                f"{benchmark} {name} alone, unfitted: AUROC for answerable "
                f"{_auroc_by(tops, lambda q: q['answerable'])}, evidence in the first {k} "
                f"{_auroc_by(tops, lambda q: answered(q, k))}, "
                f"first result right {_auroc_by(tops, lambda q: answered(q, 1))}"
            )
    sets = [(), *((name,) for name in signals), signals] if args.evidence == "each" else [(), signals]
    for chosen in dict.fromkeys(sets):
        report = evidence_report(questions, chosen, k, args.relative, args.balance)
        print(
            f"evidence factor of {', '.join(chosen) or '(none: a constant)'}, held out: {json.dumps(report)}"
        )
    for benchmark in sorted({q["benchmark"] for q in questions}):
        shipped = [(q, float(q.get("evidence_p", 0.0))) for q in questions if q["benchmark"] == benchmark]
        print(
            f"{benchmark}: the search's own evidence (DEFAULT_EVIDENCE_MODEL) as collected, AUROC for "
            f"answerable {_auroc_by(shipped, lambda q: q['answerable'])}, evidence in the first {k} "
            f"{_auroc_by(shipped, lambda q: answered(q, k))}"
        )
    model = Factored.fitted(questions, signals, k, args.relative, args.balance)
    print(
        f"fitted on all: result {np.round(model.result, 3).tolist()}, "
        f"evidence (bias, {', '.join(signals)}) {np.round(model.evidence, 3).tolist()}"
    )


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
        "--evidence",
        help="query signals of an evidence factor to fit and judge held out (comma-separated; 'each': "
        "every one alone and all together)",
    )
    parser.add_argument(
        "--evidence-k",
        type=int,
        default=10,
        help="the evidence factor's label: evidence in the first K results",
    )
    parser.add_argument(
        "--relative",
        action="store_true",
        help="with --evidence: results scored only by their standing within the query (the first one's "
        "score is then the factor times a constant)",
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
    if args.evidence:
        evidence_main(questions, args)
        return
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
