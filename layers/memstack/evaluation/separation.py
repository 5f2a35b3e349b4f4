"""Figures over whole questions rather than one ranking: abstention and knowledge-update ordering.

* **abstention AUROC**: how well a retriever's *top score* tells a question
  the conversation answers from one it cannot (BEAM's abstention questions):
  the probability that a random answerable question's top score is higher
  than a random unanswerable one's (ties count one half). 0.5 is chance; below
  it, the score is higher when there is nothing to find. The same is measured
  for the search's own ``evidence`` (a per-search probability beside the
  scores), and for both, how well they tell a question whose first ten
  results hold evidence from one whose do not (``evidence_summary``).
* **knowledge-update ordering**: for a question whose evidence names the
  original and the updated statement of a fact, whether an updated turn is
  among the first 5 distinct turns cited, and whether the best updated turn
  ranks above every turn that only holds the original.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

UPDATED = "updated_info"
ORIGINAL = "original_info"


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(positive > negative) + ½ P(tie) over every pair; None unless both sides have a value."""
    if not positives or not negatives:
        return None
    wins = 0.0
    for p in positives:
        for n in negatives:
            wins += 1.0 if p > n else 0.5 if p == n else 0.0
    return wins / (len(positives) * len(negatives))


@dataclass(frozen=True)
class Ordering:
    """Where the updated and the original-only evidence of one knowledge-update question ranked."""

    updated_rank: int | None
    original_rank: int | None
    #: the question names original turns that are not also updated ones
    has_original: bool

    @property
    def updated_in_top5(self) -> bool:
        return self.updated_rank is not None and self.updated_rank <= 5

    @property
    def updated_first(self) -> bool | None:
        """The updated turn above every original-only one (None: no original-only turn to beat)."""
        if not self.has_original:
            return None
        if self.updated_rank is None:
            return False
        return self.original_rank is None or self.updated_rank < self.original_rank


def update_ordering(ranks: Mapping[str, int | None], groups: Mapping[str, Sequence[str]]) -> Ordering | None:
    """The ordering of one question (``ranks``: each evidence turn's rank, None if missed); None if
    the question names no updated turn."""
    updated = list(groups.get(UPDATED, ()))
    if not updated:
        return None
    original_only = [t for t in groups.get(ORIGINAL, ()) if t not in set(updated)]

    def best(turns: Sequence[str]) -> int | None:
        found = [r for t in turns if (r := ranks.get(t)) is not None]
        return min(found) if found else None

    return Ordering(best(updated), best(original_only), bool(original_only))


def ordering_summary(orderings: Sequence[Ordering]) -> dict[str, float | int | None]:
    """Shares over the questions: updated evidence in the top 5, updated ranked above original-only."""
    firsts = [o.updated_first for o in orderings if o.updated_first is not None]
    return {
        "questions": len(orderings),
        "updated_in_top5": round(sum(o.updated_in_top5 for o in orderings) / len(orderings), 4)
        if orderings
        else None,
        "updated_first_questions": len(firsts),
        "updated_first": round(sum(firsts) / len(firsts), 4) if firsts else None,
    }


def abstention_summary(answerable: Sequence[float], unanswerable: Sequence[float]) -> dict[str, float | None]:
    """AUROC of the top score, and its median on each side."""
    value = auroc(answerable, unanswerable)
    return {
        "auroc": None if value is None else round(value, 4),
        "answerable_median": round(statistics.median(answerable), 4) if answerable else None,
        "unanswerable_median": round(statistics.median(unanswerable), 4) if unanswerable else None,
        "answerable": len(answerable),
        "unanswerable": len(unanswerable),
    }


@dataclass(frozen=True)
class SearchLevel:
    """One question's whole-search figures: the search's ``evidence``, its top score, whether the
    conversation can answer it, and whether an evidence turn is among the first ten turns its
    results cite (turn recall's ranks)."""

    evidence: float
    top_score: float
    answerable: bool
    found_in_10: bool


def evidence_summary(rows: Sequence[SearchLevel]) -> dict[str, dict[str, float | None]]:
    """AUROC of ``evidence`` and of the top score, for "answerable" and for "found in the first 10"."""
    out: dict[str, dict[str, float | None]] = {}
    for label, positive in (("answerable", lambda r: r.answerable), ("found_in_10", lambda r: r.found_in_10)):
        yes = [r for r in rows if positive(r)]
        no = [r for r in rows if not positive(r)]
        figures: dict[str, float | None] = {}
        for name in ("evidence", "top_score"):
            value = auroc([getattr(r, name) for r in yes], [getattr(r, name) for r in no])
            figures[name] = None if value is None else round(value, 4)
        figures["evidence_median_yes"] = round(statistics.median(r.evidence for r in yes), 4) if yes else None
        figures["evidence_median_no"] = round(statistics.median(r.evidence for r in no), 4) if no else None
        figures["yes"], figures["no"] = len(yes), len(no)
        out[label] = figures
    return out
