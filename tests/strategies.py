"""Hypothesis strategies shared by the tests that hold several filter implementations to one rule."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from memstack.models import Category, Kind, MemoryFilters, Scope, Tier

#: metadata values records and filters draw from: equal and unequal across JSON types
METADATA_VALUES: list[str | int | float | bool] = ["food", "travel", "1", 1, 1.0, 2.5, True, False]
METADATA_KEYS = ["topic", "n", "consolidated"]


def metadata_of(rng: Any) -> dict[str, Any]:
    """Random record metadata (a numpy ``Generator``): some keys, values of any type, sometimes a list."""
    out: dict[str, Any] = {}
    for key in METADATA_KEYS[:2]:
        if rng.random() < 0.6:
            out[key] = METADATA_VALUES[int(rng.integers(0, len(METADATA_VALUES)))]
    if rng.random() < 0.1:
        out["topic"] = ["food", "travel"]  # not a scalar: no filter matches it
    return out


def metadata_conditions() -> st.SearchStrategy[dict[str, tuple[Any, ...]]]:
    values = st.lists(st.sampled_from(METADATA_VALUES), min_size=1, max_size=3).map(tuple)
    return st.dictionaries(st.sampled_from(METADATA_KEYS), values, min_size=1, max_size=2)


def memory_filters(t0: datetime, days: int) -> st.SearchStrategy[MemoryFilters]:
    """Any ``MemoryFilters``: time bounds within ``days`` of ``t0``, sessions s1-s3, metadata conditions."""
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
        metadata=st.none() | metadata_conditions(),
    )
