"""The agent and metadata filters of search and list requests, as ``MemoryFilters.metadata``.

``agent_id`` is the metadata key every add with an ``agent_id`` writes, so an
agent filter is a metadata condition on it. A listing takes the metadata
filter as one query parameter holding its JSON (``metadata={"topic":"food"}``),
read with the same rules (``schemas.MetadataFilter``) as the search body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from memstack.api.errors import validation_details
from memstack.api.schemas import MetadataFilter
from memstack.errors import ValidationFailed

AGENT_KEY = "agent_id"
_METADATA = TypeAdapter(MetadataFilter)


def conditions(
    metadata: Mapping[str, tuple[Any, ...]] | None, agent_id: str | None, *, field: str
) -> dict[str, tuple[Any, ...]] | None:
    """The metadata conditions with the agent's; ``None`` when there are none."""
    out = dict(metadata or {})
    if agent_id is not None:
        if AGENT_KEY in out:
            raise ValidationFailed(
                f"agent_id is given twice (as agent_id and in {field}): give it once",
                [_problem(f"{field}.{AGENT_KEY}", "also given as agent_id", "body")],
            )
        out[AGENT_KEY] = (agent_id,)
    return out or None


def metadata_query(raw: str | None) -> dict[str, tuple[Any, ...]] | None:
    """The ``metadata`` query parameter of a listing (JSON text), validated as a search's filter is."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        raise ValidationFailed(
            'metadata: not JSON; send e.g. metadata={"topic":"food"} (URL-encoded)',
            [_problem("metadata", "not JSON", "query", "json_invalid")],
        ) from None
    try:
        return _METADATA.validate_python(value)
    except ValidationError as exc:
        details = validation_details([{**e, "loc": ("query", "metadata", *e["loc"])} for e in exc.errors()])
        first = details[0]
        raise ValidationFailed(f"{first['field']}: {first['message']}", details) from None


def _problem(field: str, message: str, location: str, kind: str = "value_error") -> dict[str, Any]:
    return {"field": field, "location": location, "message": message, "type": kind}
