"""The agent and metadata filters of search and list requests, as ``MemoryFilters.metadata``.

``agent_id`` is the metadata key every add with an ``agent_id`` writes, so an
agent filter is a metadata condition on it. A listing takes the metadata
filter as one query parameter holding its JSON (``metadata={"topic":"food"}``),
read with the same rules (``schemas.MetadataFilter``) as the search body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from memstack.api import json_body
from memstack.api.errors import validation_details
from memstack.api.schemas import FilterExpression, MetadataFilter, MetadataOps
from memstack.domain import filter_expr
from memstack.domain.filter_expr import Node
from memstack.errors import ValidationFailed

AGENT_KEY = "agent_id"
_METADATA = TypeAdapter(MetadataFilter)
_EXPRESSION = TypeAdapter(FilterExpression)


def conditions(
    metadata: Mapping[str, tuple[Any, ...] | MetadataOps] | None, agent_id: str | None, *, field: str
) -> tuple[dict[str, tuple[Any, ...]] | None, Node | None]:
    """The plain metadata conditions with the agent's, and the keys with operators as an expression."""
    plain = {k: v for k, v in (metadata or {}).items() if not isinstance(v, MetadataOps)}
    ops = [
        filter_expr.metadata_condition(k, v.condition, f"{field}.{k}")
        for k, v in (metadata or {}).items()
        if isinstance(v, MetadataOps)
    ]
    if agent_id is not None:
        if AGENT_KEY in (metadata or {}):
            raise ValidationFailed(
                f"agent_id is given twice (as agent_id and in {field}): give it once",
                [_problem(f"{field}.{AGENT_KEY}", "also given as agent_id", "body")],
            )
        plain[AGENT_KEY] = (agent_id,)
    expression = None if not ops else ops[0] if len(ops) == 1 else filter_expr.AllOf(tuple(ops))
    return plain or None, expression


def _json_query(name: str, raw: str, example: str) -> Any:
    try:
        # The API's one JSON parser: a lone surrogate is 422, an oversized integer a marker no field takes.
        return json_body.loads(raw, location="query", field=name)
    except (ValueError, RecursionError):
        raise ValidationFailed(
            f"{name}: not JSON; send e.g. {name}={example} (URL-encoded)",
            [_problem(name, "not JSON", "query", "json_invalid")],
        ) from None


def _validated(adapter: TypeAdapter[Any], name: str, raw: str | None, example: str) -> Any:
    if raw is None:
        return None
    try:
        return adapter.validate_python(_json_query(name, raw, example))
    except ValidationError as exc:
        details = validation_details([{**e, "loc": ("query", name, *e["loc"])} for e in exc.errors()])
        first = details[0]
        raise ValidationFailed(f"{first['field']}: {first['message']}", details) from None


def metadata_query(raw: str | None) -> dict[str, tuple[Any, ...] | MetadataOps] | None:
    """The ``metadata`` query parameter of a listing (JSON text), validated as a search's filter is."""
    return _validated(_METADATA, "metadata", raw, '{"topic":"food"}')


def where_query(raw: str | None) -> Node | None:
    """The ``where`` query parameter of a listing (JSON text), validated as a search's ``filters.where``."""
    return _validated(_EXPRESSION, "where", raw, '{"kind":"event"}')


def _problem(field: str, message: str, location: str, kind: str = "value_error") -> dict[str, Any]:
    return {"field": field, "location": location, "message": message, "type": kind}
