"""Hypothesis strategies shared by the tests that hold several filter implementations to one rule."""

from __future__ import annotations

from datetime import datetime, timedelta

from hypothesis import strategies as st
from memstack.models import Category, Kind, MemoryFilters, Scope, Tier


def memory_filters(t0: datetime, days: int) -> st.SearchStrategy[MemoryFilters]:
    """Any ``MemoryFilters``: time bounds within ``days`` of ``t0``, sessions s1-s3."""
    return st.builds(
        MemoryFilters,
        kind=st.none() | st.sampled_from(list(Kind)),
        category=st.none() | st.sampled_from([Category.TRAVEL, Category.HEALTH]),
        scope=st.none() | st.sampled_from(list(Scope)),
        tier=st.none() | st.sampled_from(list(Tier)),
        after=st.none() | st.integers(0, days).map(lambda d: t0 + timedelta(days=d)),
        before=st.none() | st.integers(0, days).map(lambda d: t0 + timedelta(days=d)),
        session_id=st.none() | st.sampled_from(["s1", "s2", "s3"]),
        include_superseded=st.booleans(),
    )
