"""``MemoryFilters`` as SQL conditions on alias ``m``, with named parameters.

The rules are the embedded store's (``memstack.adapters.embedded.store.filter_sql``):
current versions unless ``include_superseded``; search never shows
tombstones and shows CONTEXT memories only inside their own session; a
listing without a session shows them all. Tenant and user are added by every
caller, always.

Metadata conditions (``domain.metadata_filter``) compare ``metadata -> key``
with each wanted value as ``jsonb``: jsonb equality is by JSON type, and
numbers compare numerically (``1`` equals ``1.0``, never ``"1"`` or
``true``), and a list or ``null`` at the key equals no scalar, which is the
domain's rule exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from memstack.adapters.postgres.records import micros, micros_sql
from memstack.adapters.postgres.where import where_sql
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
        clauses.append(
            "m.session_id = :f_session"
            if filters.session_only
            else "(m.scope = 'USER' OR m.session_id = :f_session)"
        )
        params["f_session"] = filters.session_id
    elif search:
        clauses.append("m.scope = 'USER'")
    if filters.metadata:
        more, more_params = metadata_sql(filters.metadata)
        clauses += more
        params.update(more_params)
    if filters.where is not None:
        expression, expression_params = where_sql(filters.where)
        clauses.append(expression)
        params.update(expression_params)
    return ("".join(f" AND {c}" for c in clauses), params)


def metadata_sql(conditions: Mapping[str, Sequence[Any]]) -> tuple[list[str], dict[str, Any]]:
    """One condition per key: its value is any of the wanted values (keys and values are parameters)."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for i, (key, values) in enumerate(sorted(conditions.items())):
        clauses.append(
            f"(m.metadata -> CAST(:f_mk{i} AS text)) IN "
            f"(SELECT jsonb_array_elements(CAST(:f_mv{i} AS jsonb)))"
        )
        params[f"f_mk{i}"] = key
        params[f"f_mv{i}"] = json.dumps(list(values))
    return clauses, params
