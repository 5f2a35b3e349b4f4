"""List cursors on PostgreSQL: the shared position encoding, range-checked before the database sees it."""

from __future__ import annotations

from typing import Any

import pytest
from memstack.domain.cursors import encode_position
from memstack.errors import BadRequest
from memstack.models import MemoryFilters

from .conftest import record


@pytest.mark.parametrize(
    "position",
    [
        (1e300, 1),  # a time no timestamptz holds
        (-1e18, 1),  # before year 1
        (1.5, 1),  # not a whole microsecond: no cursor the store issued
        (0.0, 2**63),  # a sequence number beyond bigint
        (float("inf"), 1),
    ],
    ids=["far-future", "far-past", "fractional", "huge-seq", "infinite"],
)
def test_a_forged_position_is_a_bad_request_not_a_database_error(
    make_store: Any, position: tuple[float, int]
) -> None:
    store = make_store()
    store.put([record("one"), record("two")])
    with pytest.raises(BadRequest):
        store.list("t1", "u1", MemoryFilters(), 1, encode_position(*position))


def test_an_issued_cursor_decodes_to_the_next_page(make_store: Any) -> None:
    store = make_store()
    store.put([record(f"memory {i}") for i in range(3)])
    first, cursor = store.list("t1", "u1", MemoryFilters(), 2)
    assert cursor is not None
    rest, end = store.list("t1", "u1", MemoryFilters(), 2, cursor)
    assert end is None and len({r.id for r in first + rest}) == 3
