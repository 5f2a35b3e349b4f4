"""``MemoryFilters`` as SQL conditions on alias ``m``, with named parameters.

The rules are the embedded store's (``memstack.adapters.embedded.store.filter_sql``):
current versions unless ``include_superseded``; search never shows
tombstones and shows CONTEXT memories only inside their own session; a
listing without a session shows them all. Tenant and user are added by every
caller, always.
"""

from __future__ import annotations

from typing import Any

from memstack.adapters.postgres.records import micros, micros_sql
from memstack.models import MemoryFilters

#: the owner condition every statement carries
OWNER = "m.tenant = :tenant AND m.user_id = :user_id"


def filter_sql(filters: MemoryFilters, *, search: bool) -> tuple[str, dict[str, Any]]:
    """`` AND ...`` conditions (or ``""``) and their parameters (names start with ``f_``)."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if not filters.include_superseded:
        clauses.append("m.is_current")
    if search:
        clauses.append("NOT m.deleted")
    for column in ("kind", "category", "scope", "tier"):
        value = getattr(filters, column)
        if value is not None:
            clauses.append(f"m.{column} = :f_{column}")
            params[f"f_{column}"] = str(value)
    if filters.after is not None:
        clauses.append(f"coalesce(m.event_time, m.created_at) >= {micros_sql(':f_after')}")
        params["f_after"] = micros(filters.after)
    if filters.before is not None:
        clauses.append(f"coalesce(m.event_time, m.created_at) < {micros_sql(':f_before')}")
        params["f_before"] = micros(filters.before)
    if filters.session_id is not None:
        clauses.append("(m.scope = 'USER' OR m.session_id = :f_session)")
        params["f_session"] = filters.session_id
    elif search:
        clauses.append("m.scope = 'USER'")
    return ("".join(f" AND {c}" for c in clauses), params)
