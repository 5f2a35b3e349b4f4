"""A filter expression (``domain.filter_expr``) as one OpenSearch query clause.

AND is ``bool.filter``, OR ``bool.should`` (one must match), NOT
``bool.must_not``: a document lacking the field fails the inner clause, so
NOT keeps it, as the domain says. Metadata equality and ``in`` use the typed
terms of ``metadata_terms`` (the fast path of plain metadata filters);
comparisons and ``contains`` read the nested ``metadata_values`` (``s`` for
strings, ``n`` for numbers), typed so a string never matches a number.
Keyword ranges compare bytes, which is code-point order.

Known difference: OpenSearch ``date`` fields keep milliseconds, so two times
within the same millisecond compare equal there (the other backends keep
microseconds).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memstack.adapters.opensearch.mapping import METADATA_TERMS, METADATA_VALUES
from memstack.domain.filter_expr import AllOf, AnyOf, Cond, Node, Not
from memstack.domain.metadata_filter import term, wanted_terms


def _wildcard(text: str) -> str:
    """``*text*`` with the wildcard syntax of ``text`` escaped."""
    escaped = text.replace("\\", "\\\\").replace("*", "\\*").replace("?", "\\?")
    return f"*{escaped}*"


def _nested(key: str, clause: dict[str, Any]) -> dict[str, Any]:
    return {
        "nested": {
            "path": METADATA_VALUES,
            "query": {"bool": {"filter": [{"term": {f"{METADATA_VALUES}.key": key}}, clause]}},
        }
    }


def _meta_leaf(cond: Cond, key: str) -> dict[str, Any]:
    value = cond.value
    if cond.op == "eq":
        return {"term": {METADATA_TERMS: term(key, value)}}
    if cond.op == "in":
        assert isinstance(value, tuple)
        return {"terms": {METADATA_TERMS: wanted_terms(key, value)}}
    if cond.op == "contains":
        assert isinstance(value, str)
        return _nested(key, {"wildcard": {f"{METADATA_VALUES}.s": {"value": _wildcard(value)}}})
    sub = "s" if isinstance(value, str) else "n"
    return _nested(key, {"range": {f"{METADATA_VALUES}.{sub}": {cond.op: value}}})


def _leaf(cond: Cond) -> dict[str, Any]:
    key = cond.key
    if key is not None:
        return _meta_leaf(cond, key)
    value = cond.value
    if cond.op == "in":
        assert isinstance(value, tuple)
        return {"terms": {cond.field: list(value)}}
    if cond.op == "contains":
        assert isinstance(value, str)
        return {"wildcard": {cond.field: {"value": _wildcard(value)}}}
    if isinstance(value, datetime):
        at = value.isoformat()
        bounds = {"gte": at, "lte": at} if cond.op == "eq" else {cond.op: at}
        return {"range": {cond.field: bounds}}
    return {"term": {cond.field: value}}


def where_clause(expr: Node) -> dict[str, Any]:
    if isinstance(expr, Cond):
        return _leaf(expr)
    if isinstance(expr, Not):
        return {"bool": {"must_not": [where_clause(expr.item)]}}
    if isinstance(expr, AllOf):
        return {"bool": {"filter": [where_clause(e) for e in expr.items]}}
    assert isinstance(expr, AnyOf)
    return {"bool": {"should": [where_clause(e) for e in expr.items], "minimum_should_match": 1}}
