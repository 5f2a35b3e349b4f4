"""A filter expression (``domain.filter_expr``) as one SQLite condition on alias ``m``.

Metadata is the row's JSON text: ``json_type`` checks the JSON type first
(``'text'``, ``'integer'``/``'real'``, ``'true'``/``'false'``), so values
compare by type as the domain says, and ``json_extract`` reads the value.
Text compares with SQLite's default BINARY collation, which is code-point
order, as Python compares strings. Every leaf is wrapped in ``COALESCE(…, 0)``
so that it is 0 or 1, never NULL, and ``NOT`` is plain negation.
"""

from __future__ import annotations

from typing import Any

from memstack.domain.filter_expr import AllOf, AnyOf, Cond, Node, Not

_SQL_OP = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def _meta_leaf(cond: Cond, path: str) -> tuple[str, list[Any]]:
    value = cond.value
    if cond.op == "in":
        assert isinstance(value, tuple)
        parts = [_meta_leaf(Cond(cond.field, "eq", v), path) for v in value]
        return "(" + " OR ".join(p for p, _ in parts) + ")", [x for _, ps in parts for x in ps]
    if cond.op == "contains":
        return (
            "COALESCE(json_type(m.metadata, ?) = 'text' AND instr(json_extract(m.metadata, ?), ?) > 0, 0)",
            [path, path, value],
        )
    if isinstance(value, bool):  # eq only: comparisons of booleans are refused by parse
        return "COALESCE(json_type(m.metadata, ?) = ?, 0)", [path, "true" if value else "false"]
    types = "('integer', 'real')" if isinstance(value, int | float) else "('text')"
    return (
        f"COALESCE(json_type(m.metadata, ?) IN {types} "
        f"AND json_extract(m.metadata, ?) {_SQL_OP[cond.op]} ?, 0)",
        [path, path, value],
    )


def _leaf(cond: Cond) -> tuple[str, list[Any]]:
    key = cond.key
    if key is not None:
        return _meta_leaf(cond, f'$."{key}"')  # keys are [A-Za-z0-9_.-]: nothing to escape
    column = f"m.{cond.field}"
    value = cond.value
    if cond.op == "in":
        assert isinstance(value, tuple)
        return f"COALESCE({column} IN ({','.join('?' * len(value))}), 0)", list(value)
    if cond.op == "contains":
        return f"COALESCE(instr({column}, ?) > 0, 0)", [value]
    param = value.timestamp() if hasattr(value, "timestamp") else value
    return f"COALESCE({column} {_SQL_OP[cond.op]} ?, 0)", [param]


def where_sql(expr: Node) -> tuple[str, list[Any]]:
    """The condition and its parameters, in order."""
    if isinstance(expr, Cond):
        return _leaf(expr)
    if isinstance(expr, Not):
        inner, params = where_sql(expr.item)
        return f"(NOT {inner})", params
    assert isinstance(expr, AllOf | AnyOf)
    parts = [where_sql(e) for e in expr.items]
    joiner = " AND " if isinstance(expr, AllOf) else " OR "
    return "(" + joiner.join(p for p, _ in parts) + ")", [x for _, ps in parts for x in ps]
