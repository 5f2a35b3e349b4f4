"""Filter expressions with logic and comparisons: what they mean, defined once for every backend.

An expression is a tree of ``AllOf`` (AND), ``AnyOf`` (OR), ``Not`` and
``Cond`` leaves. A leaf compares one field of a memory with a value:

- ``meta:<key>`` (a metadata key; ``agent_id`` is the metadata key every add
  with an agent writes): ``eq`` / ``in`` compare as JSON values do, by type
  (``domain.metadata_filter``: ``"1"``, ``1`` and ``true`` differ, ``1``
  equals ``1.0``); ``gt`` / ``gte`` / ``lt`` / ``lte`` compare a number with
  numbers and a string with strings (by code point), a value of another type
  never matches; ``contains`` is a case-sensitive substring of a string value.
- ``created_at`` and ``event_time``: times (``eq`` and the four comparisons);
  a memory without an event time matches no condition on it.
- ``category`` and ``kind``: ``eq``, ``in`` and ``contains``; a memory
  without a category matches no condition on it.

``ne`` and ``nin`` are ``Not(eq)`` and ``Not(in)``: they also match memories
that lack the key (``parse`` writes them so, and backends translate only the
seven positive operators). A leaf is always true or false, never unknown, so
``Not`` is plain negation on every backend: SQL translations wrap each leaf
in ``COALESCE(..., false)``.

Each backend translates the tree (SQLite ``json_extract``, PostgreSQL
``jsonb``, OpenSearch ``bool`` queries); the in-process stores and the tests
use ``evaluate`` here, the reference every translation is held to.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # models holds filters holding expressions: the import goes one way only
    from memstack.models import MemoryRecord

Scalar = str | int | float | bool
Value = Scalar | datetime | tuple[Scalar, ...]

META = "meta:"
TIME_FIELDS = ("created_at", "event_time")
ENUM_FIELDS = ("category", "kind")
#: the record's own fields an expression may name (``agent_id`` is metadata)
RECORD_FIELDS = (*TIME_FIELDS, *ENUM_FIELDS, "agent_id")
COMPARISONS = ("gt", "gte", "lt", "lte")
OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains")
LOGIC = ("AND", "OR", "NOT")
#: bounds on one expression: leaves, nesting, values of one ``in``
MAX_LEAVES = 50
MAX_DEPTH = 6
MAX_IN_VALUES = 100


class Node:
    """A filter expression (one of the four node classes below)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Cond(Node):
    field: str  # "created_at" | "event_time" | "category" | "kind" | "meta:<key>"
    op: str  # eq | in | gt | gte | lt | lte | contains
    value: Value

    @property
    def key(self) -> str | None:
        """The metadata key of a metadata condition, else ``None``."""
        return self.field[len(META) :] if self.field.startswith(META) else None


@dataclass(frozen=True, slots=True)
class AllOf(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class AnyOf(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not(Node):
    item: Node


# ---------------------------------------------------------------- evaluation
def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_value(have: Any, want: Scalar) -> bool:
    """JSON equality by type (``metadata_filter``'s rule)."""
    if isinstance(want, bool) or isinstance(have, bool):
        return isinstance(want, bool) and isinstance(have, bool) and have == want
    if _is_number(want):
        return _is_number(have) and have == want
    return isinstance(have, str) and have == want


def _compare(have: Any, op: str, want: Any) -> bool:
    if _is_number(want):
        if not _is_number(have):
            return False
    elif isinstance(want, str):
        if not isinstance(have, str):
            return False
    elif isinstance(want, datetime):
        if not isinstance(have, datetime):
            return False
    else:
        return False
    if op == "gt":
        return bool(have > want)
    if op == "gte":
        return bool(have >= want)
    if op == "lt":
        return bool(have < want)
    return bool(have <= want)


def _field_value(record: MemoryRecord, cond: Cond) -> Any:
    key = cond.key
    if key is not None:
        return record.metadata.get(key)
    value = getattr(record, cond.field)
    return str(value.value) if isinstance(value, Enum) else value


def _leaf(record: MemoryRecord, cond: Cond) -> bool:
    have = _field_value(record, cond)
    if have is None:
        return False
    if cond.op == "eq":
        if isinstance(cond.value, datetime):
            return isinstance(have, datetime) and have == cond.value
        return same_value(have, cond.value)  # type: ignore[arg-type]
    if cond.op == "in":
        assert isinstance(cond.value, tuple)
        return any(same_value(have, v) for v in cond.value)
    if cond.op == "contains":
        return isinstance(have, str) and isinstance(cond.value, str) and cond.value in have
    return _compare(have, cond.op, cond.value)


def evaluate(expr: Node, record: MemoryRecord) -> bool:
    """True when ``record`` satisfies ``expr``: the reference every backend's translation matches."""
    if isinstance(expr, Cond):
        return _leaf(record, expr)
    if isinstance(expr, AllOf):
        return all(evaluate(e, record) for e in expr.items)
    if isinstance(expr, AnyOf):
        return any(evaluate(e, record) for e in expr.items)
    if isinstance(expr, Not):
        return not evaluate(expr.item, record)
    raise TypeError(f"not a filter expression: {expr!r}")


def leaves(expr: Node) -> list[Cond]:
    if isinstance(expr, Cond):
        return [expr]
    if isinstance(expr, Not):
        return leaves(expr.item)
    assert isinstance(expr, AllOf | AnyOf)
    return [c for e in expr.items for c in leaves(e)]


# ------------------------------------------------------------------- parsing
_SHAPE = (
    'a filter is {"AND": [filters]}, {"OR": [filters]}, {"NOT": filter}, or {field: condition} '
    f'with field one of {", ".join(RECORD_FIELDS)}, metadata.<key>, or {{"metadata": {{key: condition}}}}; '
    f"a condition is a value (equality) or {{operator: value}} with operator one of {', '.join(OPERATORS)}"
)


class FilterError(ValueError):
    """An expression that cannot be read; the message says what is wrong and what is allowed."""


def _scalar(value: Any, where: str) -> Scalar:
    if value is None:
        raise FilterError(f"{where}: null matches nothing; filter on a string, number or boolean")
    if isinstance(value, bool | int | str):
        if isinstance(value, str) and len(value) > 1000:
            raise FilterError(f"{where}: strings may have at most 1000 characters")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FilterError(f"{where}: numbers must be finite")
        return value
    raise FilterError(f"{where}: must be a string, number or boolean")


def _time(value: Any, where: str) -> datetime:
    if not isinstance(value, str | datetime):
        raise FilterError(f"{where}: a time is an ISO 8601 string")
    try:
        when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    except ValueError:
        raise FilterError(f"{where}: {value!r} is not an ISO 8601 time") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _enum_value(field: str, value: Any, where: str) -> str:
    """A kind, or the form of a category name: which categories a tenant has is its configuration's
    (``domain.tenant.guidance.check_filters`` holds a filter to them)."""
    from memstack.models import CATEGORY_PATTERN, Kind

    if field == "category":
        if not isinstance(value, str) or not re.fullmatch(CATEGORY_PATTERN, value):
            raise FilterError(f"{where}: {value!r} is not a category name (lower-case words joined by '_')")
        return value
    allowed = [str(v) for v in Kind]
    if value not in allowed:
        raise FilterError(f"{where}: {value!r} is not a {field} (one of {', '.join(allowed)})")
    return str(value)


def categories_named(node: Node) -> set[str]:
    """The category names an expression compares with (``eq`` / ``in``; ``contains`` names none)."""
    if isinstance(node, Cond):
        if node.field != "category" or node.op not in ("eq", "in"):
            return set()
        return {str(v) for v in node.value} if isinstance(node.value, tuple) else {str(node.value)}
    if isinstance(node, Not):
        return categories_named(node.item)
    items = node.items if isinstance(node, AllOf | AnyOf) else ()
    return set().union(*(categories_named(i) for i in items))


def _leaf_of(field: str, op: str, value: Any, where: str) -> Node:
    """One condition, checked against what the field allows; ``ne`` / ``nin`` become ``Not``."""
    if op not in OPERATORS:
        raise FilterError(f"{where}: unknown operator {op!r} (one of {', '.join(OPERATORS)})")
    positive = {"ne": "eq", "nin": "in"}.get(op, op)
    if positive == "in" and (not isinstance(value, list | tuple) or not 1 <= len(value) <= MAX_IN_VALUES):
        raise FilterError(f"{where}: {op!r} takes a list of 1 to {MAX_IN_VALUES} values")
    if field in TIME_FIELDS:
        if positive not in ("eq", *COMPARISONS):
            raise FilterError(f"{where}: {field} takes eq, ne, gt, gte, lt, lte")
        node: Node = Cond(field, positive, _time(value, where))
    elif field in ENUM_FIELDS:
        if positive in COMPARISONS:
            raise FilterError(f"{where}: {field} takes eq, ne, in, nin, contains")
        if positive == "in":
            node = Cond(field, "in", tuple(_enum_value(field, v, where) for v in value))
        elif positive == "contains":
            if not isinstance(value, str) or not value:
                raise FilterError(f"{where}: contains takes a non-empty string")
            node = Cond(field, "contains", value)
        else:
            node = Cond(field, "eq", _enum_value(field, value, where))
    else:
        if positive == "in":
            node = Cond(field, "in", tuple(_scalar(v, where) for v in value))
        elif positive == "contains":
            if not isinstance(value, str) or not value:
                raise FilterError(f"{where}: contains takes a non-empty string")
            node = Cond(field, "contains", value)
        else:
            scalar = _scalar(value, where)
            if positive in COMPARISONS and isinstance(scalar, bool):
                raise FilterError(f"{where}: {op} compares numbers or strings, not booleans")
            node = Cond(field, positive, scalar)
    return Not(node) if positive != op else node


def _condition(field: str, raw: Any, where: str) -> list[Node]:
    if isinstance(raw, Mapping):
        if not raw:
            raise FilterError(f"{where}: an empty condition; {_SHAPE}")
        return [_leaf_of(field, str(op), value, f"{where}.{op}") for op, value in raw.items()]
    if isinstance(raw, list):
        raise FilterError(f'{where}: a list of values is written {{"in": [values]}}')
    return [_leaf_of(field, "eq", raw, where)]


_KEY = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


def _metadata_field(key: Any, where: str) -> str:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise FilterError(f"{where}: a metadata key has 1 to 64 letters, digits, '_', '.' or '-'")
    return META + key


def _parse(raw: Any, where: str, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise FilterError(f"{where}: filters nest at most {MAX_DEPTH} deep")
    if not isinstance(raw, Mapping) or not raw:
        raise FilterError(f"{where}: {_SHAPE}")
    parts: list[Node] = []
    for name, value in raw.items():
        at = f"{where}.{name}"
        if name in ("AND", "OR"):
            if not isinstance(value, list) or not value:
                raise FilterError(f"{at}: takes a non-empty list of filters")
            items = tuple(_parse(v, f"{at}[{i}]", depth + 1) for i, v in enumerate(value))
            parts.append(AllOf(items) if name == "AND" else AnyOf(items))
        elif name == "NOT":
            if isinstance(value, list):
                inner: Node = AllOf(tuple(_parse(v, f"{at}[{i}]", depth + 1) for i, v in enumerate(value)))
            else:
                inner = _parse(value, at, depth + 1)
            parts.append(Not(inner))
        elif name == "metadata":
            if not isinstance(value, Mapping) or not value:
                raise FilterError(f"{at}: takes {{key: condition}}")
            for key, cond in value.items():
                parts += _condition(_metadata_field(key, f"{at}.{key}"), cond, f"{at}.{key}")
        elif isinstance(name, str) and name.startswith("metadata."):
            parts += _condition(_metadata_field(name[len("metadata.") :], at), value, at)
        elif name == "agent_id":
            parts += _condition(META + "agent_id", value, at)
        elif name in RECORD_FIELDS:
            parts += _condition(str(name), value, at)
        else:
            raise FilterError(f"{at}: unknown field {name!r}; {_SHAPE}")
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def parse(raw: Any, where: str = "where") -> Node:
    """The expression of a JSON filter (Mem0's shape: ``{"AND": [{"created_at": {"gte": ...}}, ...]}``)."""
    expr = _parse(raw, where, 1)
    if len(leaves(expr)) > MAX_LEAVES:
        raise FilterError(f"{where}: at most {MAX_LEAVES} conditions in one filter")
    return expr


def metadata_condition(key: str, raw: Any, where: str) -> Node:
    """One key's condition of a ``metadata`` filter written with operators (``{"n": {"gt": 3}}``)."""
    parts = _condition(_metadata_field(key, where), raw, where)
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def both(first: Node | None, second: Node | None) -> Node | None:
    """The AND of two optional expressions."""
    if first is None or second is None:
        return first or second
    return AllOf((first, second))
