"""The calibrated score of a whole pool at once (``ScoreModel.probabilities``) is the per-candidate one.

Stage 4 scores every pooled candidate as arrays; the ranking golden file and
every threshold a user set read the scores ``probability`` gives, so the two
must agree to the last bit, not approximately.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from memstack.domain.retrieval.calibration import ScoreModel

weight = st.floats(-20.0, 20.0, allow_nan=False)
signal = st.floats(-2.0, 2.0, allow_nan=False)
# (rrf, category, cosine, coverage) of one candidate
candidate = st.tuples(signal, signal, signal, signal)


@settings(max_examples=300, deadline=None)
@given(
    weights=st.tuples(weight, weight, weight, weight, weight, weight, weight),
    best=st.tuples(signal, signal),
    pool=st.lists(candidate, max_size=40),
)
def test_the_pool_at_once_is_each_candidate_to_the_bit(
    weights: tuple[float, ...], best: tuple[float, float], pool: list[tuple[float, float, float, float]]
) -> None:
    names = ("score_bias", "score_rrf", "score_vector", "score_coverage", "score_category")
    model = ScoreModel(
        **dict(zip(names, weights[:5], strict=True)),
        score_result_cosine=weights[5],
        score_result_coverage=weights[6],
    )
    rrf, category, cosine, coverage = (
        (np.array(c, dtype=np.float64) for c in zip(*pool, strict=True))
        if pool
        else (np.zeros(0) for _ in range(4))
    )
    got = model.probabilities(rrf, best[0], best[1], category, cosine, coverage)
    want = [model.probability(r, best[0], best[1], g, c, v) for r, g, c, v in pool]
    assert got == want  # == on floats: bit for bit
    assert all(type(p) is float for p in got)
