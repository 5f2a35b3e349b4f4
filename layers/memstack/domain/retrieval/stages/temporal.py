"""Stage 5: temporal boost for a query that names a time, and the weight of STM already consolidated.

Inside the query's window a score is unchanged; outside, it is multiplied by
``max(0.1, 1 - distance / window)`` blended with 1 (``scoring.temporal_factor``),
so it stays a probability.
"""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.domain.retrieval import columns as col
from memstack.domain.retrieval.stage import Search
from memstack.domain.scoring import temporal_factor
from memstack.domain.time.windows import temporal_score


class TemporalBoost:
    name = "temporal"

    def run(self, search: Search) -> str:
        cfg, pool, window = search.config, search.pool, search.query.window
        c = pool.facts
        if window is not None:
            pool.column(col.TEMPORAL), pool.column(col.TEMPORAL_FACTOR)
        consolidated = c.consolidated.tolist()
        weaker = [j for j in pool.order if pool.stm[j] and consolidated[j]]
        if weaker and cfg.consolidated_stm_weight > 0:
            pool.column(col.CONSOLIDATED_WEIGHT)
        pool.column(col.SCORE)
        hidden: set[int] = set()
        if window is not None:  # else every score stays as fusion left it
            for j in pool.order:
                when = datetime.fromtimestamp(float(c.when[j]), UTC)
                t = temporal_score(
                    window.distance_days(when, cfg.temporal_report_lag_days), cfg.temporal_window_days
                )
                factor = temporal_factor(t, cfg.temporal_blend)
                pool.put(col.TEMPORAL, j, t)
                # A factor, so the score stays a probability: inside the window it is unchanged.
                pool.put(col.TEMPORAL_FACTOR, j, factor)
                pool.score[j] *= factor
        for j in weaker:
            # STM already folded into LTM by consolidation counts for less (0 hides it).
            if cfg.consolidated_stm_weight <= 0:
                hidden.add(j)
                continue
            pool.put(col.CONSOLIDATED_WEIGHT, j, cfg.consolidated_stm_weight)
            pool.score[j] *= cfg.consolidated_stm_weight
        if hidden:
            pool.order = [j for j in pool.order if j not in hidden]
        scores = pool.column(col.SCORE)
        if len(pool.order) == len(pool):  # every candidate still ranked: the usual case
            scores[:] = pool.score
        else:
            scores[pool.order] = [pool.score[j] for j in pool.order]
        pool.ranked(self.name)
        return f"ok: window {window.phrase!r}" if window is not None else "skipped: the query names no time"
