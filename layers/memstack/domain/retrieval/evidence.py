"""A search's second probability: does the store hold evidence for this query at all (``evidence``)?

Each result's score says how likely *that result* is relevant (``calibration``);
it is driven by how well the rankings agree on it, and that agreement is as high
for a question the store cannot answer ("the agenda of the kickoff meeting on
January 5", when no turn gave one) as for one it can. One per-result number
cannot answer both questions: a per-query factor strong enough to separate
answerable from unanswerable questions made "is the first result right" on
LoCoMo chance (docs/retrieval.md, "Abstention"). So the search answers it
separately, from two things the query found at all:

* ``turn_cosine``: the best full-dimension cosine of a pooled raw turn (the
  words the user actually said), else of any pooled memory when no raw turn
  is pooled (a store holding only written memories);
* ``idf_coverage``: the share of the query's idf mass in words the user's
  store holds at all (``TermCounts``: every backend counts its own BM25
  document frequencies, for this user alone). A question about a detail
  nobody mentioned names words the store never saw.

    evidence = σ(bias + w_turn · turn_cosine + w_idf · idf_coverage)

It is a probability that the first ten results hold an evidence turn. The
weights are fitted by ``scripts/calibrate_scores.py --evidence`` on LoCoMo dev
and BEAM's first 11 conversations together, each conversation held out
(docs/retrieval.md gives the figures); the cosine's scale is the offline
``minilm`` embedder's, as the calibrated score's is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memstack.ports.store import TermCounts


@dataclass(frozen=True)
class EvidenceModel:
    """The weights of ``evidence`` (a logistic regression on the two signals)."""

    bias: float
    turn_cosine: float
    idf_coverage: float

    def probability(self, turn_cosine: float, idf_coverage: float) -> float:
        z = self.bias + self.turn_cosine * turn_cosine + self.idf_coverage * idf_coverage
        # Written to never overflow: exp of a large positive number is avoided on either side.
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


#: fitted by ``scripts/calibrate_scores.py --evidence query_turn_cosine,query_idf_coverage`` on LoCoMo
#: dev (5 conversations, 997 questions) + BEAM 500K's first 11 (219, 22 unanswerable), label "one of
#: the first 10 results cites an evidence turn", the pipeline's own signals (embedder minilm,
#: extraction on; stores kept from an earlier extractor); held out per conversation its AUROC for
#: BEAM's answerable vs unanswerable is 0.727. docs/retrieval.md has the run and the fresh-store check
DEFAULT_EVIDENCE_MODEL = EvidenceModel(bias=-0.497, turn_cosine=0.641, idf_coverage=1.735)


def idf_coverage(counts: TermCounts) -> float:
    """Okapi idf of the query's terms the store holds, over that of all of them (1: no terms).

    A term no record holds has the largest idf, so a query whose rarest words are
    unknown to the store covers little of its mass even when its common words match.
    """
    # A count read a moment after the total (a write in between) must not make an idf negative.
    docs = max(counts.docs, *counts.df.values(), 0)
    idf = {term: math.log(1.0 + (docs - df + 0.5) / (df + 0.5)) for term, df in counts.df.items()}
    total = sum(idf.values())
    return sum(v for term, v in idf.items() if counts.df[term]) / total if total else 1.0
