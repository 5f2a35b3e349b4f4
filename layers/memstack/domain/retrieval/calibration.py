"""Stage 4's score: a probability that a result is relevant, comparable from one query to the next.

Min-max scaling gave every query's best result 1.0 however poor it was, so no
threshold could mean anything. Instead each fused candidate gets

    score = σ(bias + w_rrf · rrf + w_vector · best_cosine + w_coverage · best_coverage
              + w_category · category)

* ``rrf``: the candidate's weighted RRF value scaled so that first place in
  every ranking is 1: how well the rankings agree on it;
* ``best_cosine`` and ``best_coverage``: the evidence the *query* found at
  all, the same for each of its results: the highest full-dimension cosine in
  the pool, and the highest share of the query's content words (as stems)
  that one candidate's indexed text contains. They lift or lower every result
  of a query together, so a query that matched nothing well scores low;
* ``category`` (0 by default): the candidate's affinity with the kind of thing
  the query asks about (``categories``).

``best_coverage`` (0 by default) added nothing once the best cosine is in
(same held-out Brier score), and costs a pass over every pooled text, so it
is computed only when its weight is set or explain asks for every signal.

Only ``rrf`` and ``category`` differ between the results of one query, so with
``w_category = 0`` the score orders them exactly as the fused ranking does.
A per-result cosine or coverage term was measured too: fitted pointwise it
re-orders each pool by absolute similarity and loses recall (LoCoMo, leave-one-
conversation-out: @10 0.794 -> 0.717), because what predicts relevance across
queries is not what ranks within one.

The weights are a logistic regression fitted on labelled (query, result) pairs:
``scripts/calibrate_scores.py`` fits them on LoCoMo and checks them
leave-one-conversation-out (docs/retrieval.md). The cosine's scale is the
embedder's: the defaults are fitted for the offline ``minilm`` model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import Field

from memstack.section import Section

if TYPE_CHECKING:  # settings read this module at every cold start: no numpy import
    import numpy as np


class ScoreModel(Section):
    """The weights of the calibrated score (``MEMSTACK_SCORE_*``).

    The defaults are fitted by scripts/calibrate_scores.py on LoCoMo (embedder minilm,
    extraction on, fusion over evidence units); see docs/retrieval.md.
    """

    bias: float = Field(-6.178, alias="score_bias", description="calibrated score: intercept")
    rrf: float = Field(6.074, alias="score_rrf", description="calibrated score: weight of scaled RRF")
    vector: float = Field(-0.475, alias="score_vector", description="calibrated score: weight of cosine")
    coverage: float = Field(
        0.0, alias="score_coverage", description="calibrated score: weight of query-word coverage"
    )
    category: float = Field(
        0.0, alias="score_category", description="calibrated score: weight of category affinity (0: off)"
    )
    #: weights of the result's own cosine and coverage (0 by default: they re-order the pool)
    result_cosine: float = Field(
        0.0, alias="score_result_cosine", description="calibrated score: weight of the result's own cosine"
    )
    result_coverage: float = Field(
        0.0, alias="score_result_coverage", description="calibrated score: weight of a result's coverage"
    )

    def probability(
        self,
        rrf: float,
        best_cosine: float,
        best_coverage: float,
        category: float = 0.0,
        cosine: float = 0.0,
        coverage: float = 0.0,
    ) -> float:
        z = self.bias + self.rrf * rrf + self.vector * best_cosine + self.coverage * best_coverage
        z += self.category * category + self.result_cosine * cosine + self.result_coverage * coverage
        return _sigmoid(z)

    def probabilities(
        self,
        rrf: np.ndarray,
        best_cosine: float,
        best_coverage: float,
        category: np.ndarray,
        cosine: np.ndarray,
        coverage: np.ndarray,
    ) -> list[float]:
        """``probability`` of every candidate of a query at once, the same to the last bit: the same
        float64 sums in the same order (numpy's elementwise arithmetic is IEEE's, as Python's), and each
        exponential by ``math.exp`` (``np.exp`` may differ from it in the last bit)."""
        z = self.bias + self.rrf * rrf + self.vector * best_cosine + self.coverage * best_coverage
        z += self.category * category + self.result_cosine * cosine + self.result_coverage * coverage
        # ``_sigmoid``'s two sides at once (array operators only: no numpy import in this module):
        # e = exp(-z) where z >= 0 and exp(z) below it (-|z| is exactly either), by math.exp
        e = -abs(z)
        e[:] = list(map(math.exp, e.tolist()))
        p = 1.0 / (1.0 + e)
        below = z < 0
        p[below] = e[below] / (1.0 + e[below])
        return p.tolist()


def _sigmoid(z: float) -> float:
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


#: the fitted weights (the field defaults)
DEFAULT_SCORE_MODEL = ScoreModel()
