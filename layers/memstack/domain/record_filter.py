"""Whether one record passes a ``MemoryFilters``: the filter rule every store applies, for one record.

The embedded store says it in SQL (``filter_sql``), the in-process rankers as numpy columns
(``adapters.filter_columns``); this is the same rule on one record in memory, the reference the
tests hold those to, and what the domain uses where it has records in hand (a search's
contradiction counterparts, ``domain.conflicts``).
"""

from __future__ import annotations

from memstack.domain import filter_expr, metadata_filter
from memstack.models import MemoryFilters, MemoryRecord, Scope


def matches(record: MemoryRecord, filters: MemoryFilters, *, search: bool) -> bool:
    """Tombstones never show; superseded versions only when asked; search applies the scope
    rule (CONTEXT memories only inside their own session), a listing without a session shows all.
    """
    if record.deleted:
        return False
    if not filters.include_superseded and not record.is_current:
        return False
    for name in ("kind", "category", "scope", "tier"):
        wanted = getattr(filters, name)
        if wanted is not None and getattr(record, name) != wanted:
            return False
    when = record.event_time or record.created_at
    if filters.after is not None and when < filters.after:
        return False
    if filters.before is not None and when >= filters.before:
        return False
    if not metadata_filter.matches(record.metadata, filters.metadata):
        return False
    if filters.where is not None and not filter_expr.evaluate(filters.where, record):
        return False
    if filters.session_id is not None:
        own = record.session_id == filters.session_id
        return own if filters.session_only else own or record.scope == Scope.USER
    return not (search and record.scope != Scope.USER)
