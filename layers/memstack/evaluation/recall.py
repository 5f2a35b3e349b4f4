"""Retrieval metrics over provenance: what the first results of a search cite, against the evidence.

A search answers with records; each record cites the turns it came from
(``source_ids``). A question's evidence is a set of turns. Every metric here
reads one ranked list of results (each a list of cited turn ids):

* **turn recall@k**: the share of evidence among the first k *distinct turns*
  the results cite, in result order. A memory citing 20 turns uses 20 of the
  k places, so a memory that cites many turns cannot hide its cost: this is
  the headline figure and the one the targets are set on.
* **any@k / all@k**: 1 when at least one / every evidence turn is among them.
* **NDCG@k**: binary-relevance DCG of those first k distinct turns, over the
  ideal (every evidence turn first).
* **session recall@k**: 1 when an evidence turn's session is among the first
  k distinct sessions the results cite (what retrieval-only peers publish).
* **cited@k**: the number of distinct turns the first k *results* cite (with
  raw turns it is k; with memories it shows how much each result carries).
* **no_new@k**: how many of the first k *results* cite no turn that an earlier
  result did not already cite: slots spent on evidence the caller already has
  (several memories of one turn in a row, say). 0 for distinct raw turns.

``QuestionResult`` keeps the rank of each evidence turn among the distinct
turns (and of each evidence session), so every figure can be recomputed for
any k (the JSON report stores them).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

METRICS = ("turn_recall", "any", "all", "ndcg", "session_recall", "cited", "no_new")


def distinct_sources(source_lists: Iterable[Sequence[str]], limit: int) -> list[str]:
    """The first ``limit`` distinct source ids, in result order."""
    out: dict[str, None] = {}
    for sources in source_lists:
        for s in sources:
            if s not in out:
                out[s] = None
                if len(out) >= limit:
                    return list(out)
    return list(out)


def recall_at(ranked_sources: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of ``evidence`` among the first ``k`` of ``ranked_sources`` (already distinct)."""
    if not evidence:
        raise ValueError("a question without evidence has no recall")
    top = set(ranked_sources[:k])
    return sum(1 for e in set(evidence) if e in top) / len(set(evidence))


@dataclass(frozen=True)
class QuestionResult:
    """Where one question's evidence landed: 1-based ranks among distinct turns, sessions (None: missed)."""

    category: str
    evidence_ranks: tuple[int | None, ...]
    session_rank: int | None
    #: distinct turns cited by the first n results, for n = 1 .. len(results)
    cited_by_results: tuple[int, ...]

    @classmethod
    def from_results(
        cls,
        category: str,
        results: Sequence[Sequence[str]],
        evidence: Sequence[str],
        session_of: Callable[[str], str],
        depth: int,
    ) -> QuestionResult:
        if not evidence:
            raise ValueError("a question without evidence has no recall")
        turns = distinct_sources(results, depth)
        position = {t: i for i, t in enumerate(turns, start=1)}
        sessions = list(dict.fromkeys(session_of(t) for t in turns))
        wanted = {session_of(e) for e in evidence}
        session_rank = next((i for i, s in enumerate(sessions, start=1) if s in wanted), None)
        cited: list[int] = []
        seen: set[str] = set()
        for sources in results:
            seen.update(sources)
            cited.append(len(seen))
        return cls(
            category,
            tuple(position.get(e) for e in dict.fromkeys(evidence)),
            session_rank,
            tuple(cited),
        )

    def value(self, metric: str, k: int) -> float:
        found = [r for r in self.evidence_ranks if r is not None and r <= k]
        n = len(self.evidence_ranks)
        if metric == "turn_recall":
            return len(found) / n
        if metric == "any":
            return 1.0 if found else 0.0
        if metric == "all":
            return 1.0 if len(found) == n else 0.0
        if metric == "ndcg":
            dcg = sum(1.0 / math.log2(r + 1) for r in found)
            ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(n, k) + 1))
            return dcg / ideal
        if metric == "session_recall":
            return 1.0 if self.session_rank is not None and self.session_rank <= k else 0.0
        if metric == "cited":
            if not self.cited_by_results:
                return 0.0
            return float(self.cited_by_results[min(k, len(self.cited_by_results)) - 1])
        if metric == "no_new":
            head = self.cited_by_results[:k]
            # A slot brings a new turn exactly when the running count of cited turns grows.
            grew = sum(1 for before, now in zip((0, *head), head, strict=False) if now > before)
            return float(len(head) - grew)
        raise ValueError(f"unknown metric {metric!r}")


class MetricTable:
    """Means of every metric per category and overall, for several k."""

    def __init__(self, ks: Sequence[int]) -> None:
        self.ks = list(ks)
        self.results: list[QuestionResult] = []

    def add(self, result: QuestionResult) -> None:
        self.results.append(result)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.results:
            out[r.category] += 1
            out["all"] += 1
        return out

    def means(
        self, categories: Sequence[str], metric: str = "turn_recall"
    ) -> dict[str, dict[str, float | None]]:
        """{"10": {"all": .., "<category>": ..}}; a category without questions is None."""
        out: dict[str, dict[str, float | None]] = {}
        for k in self.ks:
            sums: dict[str, float] = defaultdict(float)
            for r in self.results:
                v = r.value(metric, k)
                sums[r.category] += v
                sums["all"] += v
            counts = self.counts
            out[str(k)] = {
                name: (round(sums[name] / counts[name], 4) if counts.get(name) else None)
                for name in ["all", *categories]
            }
        return out

    def all_means(self, categories: Sequence[str]) -> dict[str, dict[str, dict[str, float | None]]]:
        return {metric: self.means(categories, metric) for metric in METRICS}
