"""``session_only``: a session id restricts to that session's memories (Mem0's run_id), on every backend.

Without ``session_only`` the session is the caller's view (every USER memory
plus that session's CONTEXT ones), as before.
"""

from __future__ import annotations

from typing import Any

import pytest
from memstack.models import MemoryFilters, Scope

from .test_metadata_filters import bm25, listed, vector
from .test_store_conformance import rec

NOTES = [
    ("note user s1", "s1", Scope.USER),
    ("note context s1", "s1", Scope.CONTEXT),
    ("note user s2", "s2", Scope.USER),
    ("note context s2", "s2", Scope.CONTEXT),
    ("note user no session", None, Scope.USER),
]


@pytest.mark.parametrize(
    ("filters", "want"),
    [
        (MemoryFilters(session_id="s1", session_only=True), {"note user s1", "note context s1"}),
        (MemoryFilters(session_id="s2", session_only=True, scope=Scope.USER), {"note user s2"}),
        (MemoryFilters(session_id="nope", session_only=True), set()),
        (
            MemoryFilters(session_id="s1"),
            {"note user s1", "note context s1", "note user s2", "note user no session"},
        ),
    ],
    ids=["only", "only-and-scope", "only-unknown-session", "visible"],
)
def test_a_session_restricts_list_and_both_searches(
    store: Any, filters: MemoryFilters, want: set[str]
) -> None:
    store.put([rec(c, minutes=i, session_id=s, scope=scope) for i, (c, s, scope) in enumerate(NOTES)])
    assert listed(store, filters) == want
    assert bm25(store, filters) == want
    assert vector(store, filters) == want
