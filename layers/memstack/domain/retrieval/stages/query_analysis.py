"""Stage 1: the query's time window and history intent (``memstack.domain.query_analysis``)."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.domain.query_analysis import analyse_query
from memstack.domain.retrieval.stage import Search


class AnalyseQuery:
    name = "query_analysis"

    def run(self, search: Search) -> str:
        req = search.req
        reference = req.reference_time or datetime.now(UTC)
        if reference.tzinfo is None:
            reference = reference.replace(tzinfo=UTC)
        search.analysis = analyse_query(req.query, reference)
        search.history = search.analysis.history_intent or req.include_history
        # History queries also match older versions, so "where did I live before" finds them.
        search.filters = (
            req.filters.model_copy(update={"include_superseded": True}) if search.history else req.filters
        )
        return "ok"
