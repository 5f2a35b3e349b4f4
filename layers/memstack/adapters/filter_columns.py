"""The record fields search filters read, as numpy columns, and the mask of a ``MemoryFilters``.

Both in-process rankers use it: the embedded store's per-user index and the
DynamoDB partition snapshot. A filter is then a few vector operations over
the user's rows instead of a SQL query or a Python loop per record. The rule
is the embedded store's ``filter_sql`` (and ``domain.record_filter`` on one record):
tombstones never match, superseded versions only when asked, and a search
shows CONTEXT memories only inside their own session. Tests hold the three to
the same answers on every filter.

Metadata filters are not columns (a user's keys are open-ended): each store
says which rows hold a metadata term (``RowsWithTerms``, from its own term
index) and ``metadata_mask`` combines them, so only a search that asks for
metadata pays anything for it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memstack.domain.filter_expr import Node
from memstack.domain.metadata_filter import MetadataConditions, wanted_terms
from memstack.models import Category, Kind, MemoryFilters, MemoryRecord, Scope, Tier

TIERS: tuple[str, ...] = tuple(str(t) for t in Tier)
KINDS: tuple[str, ...] = tuple(str(k) for k in Kind)
CATEGORIES: tuple[str, ...] = tuple(str(c) for c in Category)
#: the code of an absent category or session
NONE = -1
#: the code of a category no row of this process has (a filter on it matches nothing)
UNSEEN = -2

# Category codes: the built-in ones first (their positions in CATEGORIES), then every tenant's
# own categories (domain.tenant.config) in the order this process first met them. One mapping
# for the process: a code only has to mean the same name in every column it is compared with.
_category_codes: dict[str, int] = {name: code for code, name in enumerate(CATEGORIES)}
_category_lock = threading.Lock()


def category_code(name: str | None) -> int:
    """The code of a category a row holds (a new name gets the next code)."""
    if name is None:
        return NONE
    code = _category_codes.get(name)
    if code is None:
        with _category_lock:
            code = _category_codes.setdefault(name, len(_category_codes))
    return code


def category_filter_code(name: str) -> int:
    """The code a filter on ``name`` compares with (``UNSEEN`` when no row of this process has it)."""
    return _category_codes.get(name, UNSEEN)


#: the rows (positions) holding any of the given metadata terms
RowsWithTerms = Callable[[list[str]], np.ndarray]
#: the rows (positions) satisfying a filter expression (``domain.filter_expr``), by the store's own means
RowsWhere = Callable[[Node], np.ndarray]


def _codes(values: Sequence[str | None], vocabulary: Sequence[str]) -> np.ndarray:
    """Each value's position in ``vocabulary`` (``NONE`` for None or an unknown value)."""
    raw = np.array([v if v is not None else "" for v in values], dtype=object)
    out = np.full(len(values), NONE, dtype=np.int8)
    for code, name in enumerate(vocabulary):
        out[raw == name] = code
    return out


@dataclass(frozen=True)
class FilterColumns:
    """One entry per row: what ``MemoryFilters`` can ask about it.

    ``sessions`` maps a session id to its code in ``session``; it may know
    sessions no row of this view has (views share one growing mapping).
    """

    current: np.ndarray  # bool
    deleted: np.ndarray  # bool
    user_scope: np.ndarray  # bool: scope USER (else CONTEXT)
    tier: np.ndarray  # int8 code in TIERS
    kind: np.ndarray  # int8 code in KINDS
    category: np.ndarray  # int32 ``category_code``, NONE when absent
    session: np.ndarray  # int32 code in ``sessions``, NONE when absent
    when: np.ndarray  # float64: epoch seconds of event_time, else created_at
    sessions: dict[str, int] = field(default_factory=dict, compare=False)

    @staticmethod
    def array_names() -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(FilterColumns) if f.name != "sessions")

    @classmethod
    def from_values(
        cls,
        *,
        current: Sequence[bool],
        deleted: Sequence[bool],
        scope: Sequence[str],
        tier: Sequence[str],
        kind: Sequence[str],
        category: Sequence[str | None],
        session: Sequence[str | None],
        when: Sequence[float],
        sessions: dict[str, int] | None = None,
    ) -> FilterColumns:
        """Columns from plain per-row values (the strings the stores keep); ``sessions`` grows."""
        known = {} if sessions is None else sessions
        n = len(current)
        session_codes = np.fromiter(
            (NONE if s is None else known.setdefault(s, len(known)) for s in session), dtype=np.int32, count=n
        )
        return cls(
            current=np.fromiter(current, dtype=bool, count=n),
            deleted=np.fromiter(deleted, dtype=bool, count=n),
            user_scope=np.array([s == Scope.USER.value for s in scope], dtype=bool).reshape(n),
            tier=_codes(tier, TIERS),
            kind=_codes(kind, KINDS),
            category=np.fromiter(map(category_code, category), dtype=np.int32, count=n),
            session=session_codes,
            when=np.fromiter(when, dtype=np.float64, count=n),
            sessions=known,
        )

    @classmethod
    def from_records(
        cls, records: Iterable[MemoryRecord], *, sessions: dict[str, int] | None = None
    ) -> FilterColumns:
        """Columns of ``records``; ``sessions`` (grown in place) codes their sessions."""
        rows = list(records)
        return cls.from_values(
            current=[r.is_current for r in rows],
            deleted=[r.deleted for r in rows],
            scope=[str(r.scope) for r in rows],
            tier=[str(r.tier) for r in rows],
            kind=[str(r.kind) for r in rows],
            category=[str(r.category) if r.category else None for r in rows],
            session=[r.session_id for r in rows],
            when=[(r.event_time or r.created_at).timestamp() for r in rows],
            sessions=sessions,
        )

    def __len__(self) -> int:
        return len(self.current)

    def mask(
        self,
        filters: MemoryFilters,
        *,
        search: bool = True,
        rows_with: RowsWithTerms | None = None,
        rows_where: RowsWhere | None = None,
    ) -> np.ndarray:
        """True for every row ``filters`` lets through (``filter_sql``'s rule, all rows at once).

        A filter on metadata needs ``rows_with``, the store's term lookup, and an
        expression ``rows_where``; without them it is an error, never silently ignored.
        """
        keep = ~self.deleted
        if not filters.include_superseded:
            keep &= self.current
        if filters.tier is not None:
            keep &= self.tier == TIERS.index(str(filters.tier))
        if filters.kind is not None:
            keep &= self.kind == KINDS.index(str(filters.kind))
        if filters.category is not None:
            keep &= self.category == category_filter_code(str(filters.category))
        if filters.scope is not None:
            keep &= self.user_scope if filters.scope == Scope.USER else ~self.user_scope
        if filters.after is not None:
            keep &= self.when >= filters.after.timestamp()
        if filters.before is not None:
            keep &= self.when < filters.before.timestamp()
        if filters.session_id is not None:
            code = self.sessions.get(filters.session_id)
            own_session = self.session == code if code is not None else np.zeros(len(self), dtype=bool)
            keep &= own_session if filters.session_only else self.user_scope | own_session
        elif search:
            keep &= self.user_scope
        if filters.metadata:
            if rows_with is None:
                raise ValueError("a metadata filter needs the store's term lookup (rows_with)")
            keep &= metadata_mask(len(self), filters.metadata, rows_with)
        if filters.where is not None:
            if rows_where is None:
                raise ValueError("a filter expression needs the store's evaluation of it (rows_where)")
            hit = np.zeros(len(self), dtype=bool)
            hit[rows_where(filters.where)] = True
            keep &= hit
        return keep


def metadata_mask(size: int, conditions: MetadataConditions, rows_with: RowsWithTerms) -> np.ndarray:
    """True for the rows satisfying every condition (``domain.metadata_filter``'s rule)."""
    keep = np.ones(size, dtype=bool)
    for key, values in conditions.items():
        hit = np.zeros(size, dtype=bool)
        hit[rows_with(wanted_terms(key, values))] = True
        keep &= hit
    return keep
