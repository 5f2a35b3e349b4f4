"""Recall@k over provenance: how much of a question's evidence the first k distinct sources cover."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence


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


class RecallTable:
    """Mean recall per category and overall, for several k."""

    def __init__(self, ks: Sequence[int]) -> None:
        self.ks = list(ks)
        self._sums: dict[int, dict[str, float]] = {k: defaultdict(float) for k in self.ks}
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, category: str, ranked_sources: Sequence[str], evidence: Sequence[str]) -> None:
        self.counts[category] += 1
        self.counts["all"] += 1
        for k in self.ks:
            r = recall_at(ranked_sources, evidence, k)
            self._sums[k][category] += r
            self._sums[k]["all"] += r

    def means(self, categories: Sequence[str]) -> dict[str, dict[str, float | None]]:
        """{"10": {"all": .., "<category>": ..}}; a category without questions is None."""
        out: dict[str, dict[str, float | None]] = {}
        for k in self.ks:
            row: dict[str, float | None] = {}
            for name in ["all", *categories]:
                n = self.counts.get(name, 0)
                row[name] = round(self._sums[k][name] / n, 4) if n else None
            out[str(k)] = row
        return out
