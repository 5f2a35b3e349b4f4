"""Stage 4's score: a probability that a result is relevant, comparable from one query to the next.

Min-max scaling gave every query's best result 1.0 however poor it was, so no
threshold could mean anything. Instead each fused candidate gets

    score = σ(bias + w_rrf · rrf + w_vector · cosine + w_coverage · coverage
              + w_category · category)

from signals that each mean the same in every query:

* ``rrf``: the weighted RRF value scaled so that first place in every ranking
  is 1 (it says how well the rankings agree on the candidate);
* ``cosine``: the full-dimension cosine of the query and the candidate (an
  absolute similarity, where RRF only knows ranks);
* ``coverage``: the share of the query's content words (as stems) that the
  candidate's indexed text contains;
* ``category``: how much the candidate is about the kind of thing the query
  asks for (``categories``: its expected cosine with the query's categories).

The weights are a logistic regression fitted on labelled (query, candidate)
pairs: ``scripts/calibrate_scores.py`` fits them on LoCoMo and checks them
leave-one-conversation-out (docs/retrieval.md). The candidates are ranked by
this score, so rank and score always agree; a ``min_score`` threshold then
keeps results at least that likely to be relevant. The cosine's scale is the
embedder's: the defaults are fitted for the offline ``minilm`` model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ScoreModel:
    bias: float
    rrf: float
    vector: float
    coverage: float
    category: float = 0.0

    def probability(self, rrf: float, cosine: float, coverage: float, category: float = 0.0) -> float:
        z = self.bias + self.rrf * rrf + self.vector * cosine + self.coverage * coverage
        z += self.category * category
        # Written to never overflow: exp of a large positive number is avoided on either side.
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


def coverage(query_terms: set[str], document_terms: Iterable[str]) -> float:
    """Share of ``query_terms`` found in the document (0 for a query without terms)."""
    if not query_terms:
        return 0.0
    return len(query_terms.intersection(document_terms)) / len(query_terms)


#: fitted by scripts/calibrate_scores.py on LoCoMo (embedder minilm); see docs/retrieval.md
DEFAULT_SCORE_MODEL = ScoreModel(bias=-4.0, rrf=4.0, vector=0.0, coverage=0.0)
