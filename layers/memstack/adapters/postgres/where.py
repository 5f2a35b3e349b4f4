"""A filter expression (``domain.filter_expr``) as one PostgreSQL condition on alias ``m``.

Metadata is ``jsonb``: equality is ``jsonb`` equality (by JSON type, numbers
numerically, the domain's rule); a comparison first checks ``jsonb_typeof``
and then compares numbers as ``jsonb`` and strings as text in the ``"C"``
collation (code-point order, whatever the database's default collation).
Every leaf is wrapped in ``coalesce(…, false)``: never NULL, so ``NOT`` is
plain negation. Parameter names start with ``f_w``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memstack.adapters.postgres.records import micros, micros_sql
from memstack.domain.filter_expr import AllOf, AnyOf, Cond, Node, Not

_SQL_OP = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


class _Params:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, value: Any) -> str:
        name = f"f_w{len(self.values)}"
        self.values[name] = value
        return f":{name}"


def _meta_leaf(cond: Cond, key: str, p: _Params) -> str:
    at = f"(m.metadata -> CAST({p.add(key)} AS text))"
    value = cond.value
    if cond.op == "in":
        assert isinstance(value, tuple)
        wanted = p.add(json.dumps(list(value)))
        return f"coalesce({at} IN (SELECT jsonb_array_elements(CAST({wanted} AS jsonb))), false)"
    if cond.op == "eq":
        return f"coalesce({at} = CAST({p.add(json.dumps(value))} AS jsonb), false)"
    text = f"(m.metadata ->> CAST({p.add(key)} AS text))"
    if cond.op == "contains":
        part = p.add(value)
        return f"coalesce(jsonb_typeof({at}) = 'string' AND strpos({text}, CAST({part} AS text)) > 0, false)"
    op = _SQL_OP[cond.op]
    if isinstance(value, str):
        return (
            f"coalesce(jsonb_typeof({at}) = 'string' AND "
            f'{text} COLLATE "C" {op} CAST({p.add(value)} AS text) COLLATE "C", false)'
        )
    bound = p.add(json.dumps(value))
    return f"coalesce(jsonb_typeof({at}) = 'number' AND {at} {op} CAST({bound} AS jsonb), false)"


def _leaf(cond: Cond, p: _Params) -> str:
    key = cond.key
    if key is not None:
        return _meta_leaf(cond, key, p)
    column = f"m.{cond.field}"
    value = cond.value
    if cond.op == "in":
        assert isinstance(value, tuple)
        return f"coalesce({column} IN ({', '.join(p.add(v) for v in value)}), false)"
    if cond.op == "contains":
        return f"coalesce(strpos({column}, CAST({p.add(value)} AS text)) > 0, false)"
    if isinstance(value, datetime):
        return f"coalesce({column} {_SQL_OP[cond.op]} {micros_sql(p.add(micros(value)))}, false)"
    return f"coalesce({column} {_SQL_OP[cond.op]} {p.add(value)}, false)"


def _sql(expr: Node, p: _Params) -> str:
    if isinstance(expr, Cond):
        return _leaf(expr, p)
    if isinstance(expr, Not):
        return f"(NOT {_sql(expr.item, p)})"
    assert isinstance(expr, AllOf | AnyOf)
    joiner = " AND " if isinstance(expr, AllOf) else " OR "
    return "(" + joiner.join(_sql(e, p) for e in expr.items) + ")"


def where_sql(expr: Node) -> tuple[str, dict[str, Any]]:
    """The condition and its named parameters."""
    p = _Params()
    return _sql(expr, p), p.values
