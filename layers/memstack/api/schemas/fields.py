"""The field types, validators and base model every REST body shares (``memstack.api.schemas``).

Ids, free text, metadata values and filters are checked here once, so a request
model and the client both say the same thing about a bad value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator, StringConstraints

from memstack.api.json_body import OversizedInteger
from memstack.domain import filter_expr
from memstack.models import CATEGORY_PATTERN, SYSTEM_METADATA_KEYS

# Any C0 control character or DEL. Free text may keep tab, newline and carriage return.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _no_control(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain control characters")
    return value


def _clean_text(value: str) -> str:
    if _CONTROL_IN_TEXT.search(value):
        raise ValueError("must not contain control characters (tab and newline are allowed)")
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


# Every store can hold a 64-bit integer (SQLite INTEGER, OpenSearch long); a larger one failed
# in the store after the request was accepted.
_INT_RANGE = (-(2**63), 2**63 - 1)


def _metadata_value(value: Any) -> str | int | float | bool | None:
    """A JSON scalar; strings short and printable, integers 64-bit, numbers finite (NaN is not JSON)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | OversizedInteger):
        if isinstance(value, OversizedInteger) or not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
            raise ValueError("integers must fit in 64 bits (-2**63 .. 2**63-1)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite")
        return value
    if isinstance(value, str):
        if len(value) > 1000:
            raise ValueError("strings may have at most 1000 characters")
        return _no_control(value)
    raise ValueError("must be a string, number, boolean or null")


# User, session and message ids: they appear in URLs and in DynamoDB keys
# ("<tenant>#<user_id>"), so they are restricted to characters that need no
# escaping anywhere and cannot forge a key separator.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@:+=\-]*$"
IdStr = Annotated[str, StringConstraints(strict=True, min_length=1, max_length=128, pattern=ID_PATTERN)]
#: a built-in category or one of the tenant's own (``GET /v1/config``); the service checks which
CategoryStr = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=40, pattern=CATEGORY_PATTERN),
    Field(description="one of the tenant's categories: the 15 built-in ones and/or its own (GET /v1/config)"),
]
Text = Annotated[str, StringConstraints(strict=True, min_length=1), AfterValidator(_clean_text)]
ShortText = Annotated[
    str, StringConstraints(strict=True, min_length=1, max_length=200), AfterValidator(_no_control)
]
MetadataKey = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]
MetadataValue = Annotated[
    str | int | float | bool | None,
    PlainValidator(_metadata_value, json_schema_input_type=str | int | float | bool | None),
]

#: how many keys one metadata filter may test, and how many values one ``in`` may list
MAX_FILTER_KEYS = 20
MAX_IN_VALUES = 100
_CONDITION_SHAPE = "a condition is a value (equality) or {operator: value} with operator one of " + ", ".join(
    filter_expr.OPERATORS
)


def _filter_value(value: Any) -> str | int | float | bool:
    if value is None:
        raise ValueError("null matches nothing: filter on a string, number or boolean")
    out = _metadata_value(value)
    assert out is not None
    return out


@dataclass(frozen=True)
class MetadataOps:
    """A key's condition written with operators other than ``in`` (``{"gt": 3}``), already checked.

    It joins the filter expression (``domain.filter_expr``); plain values and ``in``
    keep the metadata term index's fast path.
    """

    condition: dict[str, Any]


def _metadata_condition(value: Any) -> tuple[str | int | float | bool, ...] | MetadataOps:
    """One key's condition as the values it may hold: ``v`` is ``(v,)``, ``{"in": [a, b]}`` is ``(a, b)``."""
    if isinstance(value, dict):
        if not value:
            raise ValueError(_CONDITION_SHAPE)
        if set(value) != {"in"}:
            try:
                filter_expr.metadata_condition("key", value, "value")
            except filter_expr.FilterError as exc:
                raise ValueError(re.sub(r"^value[^:]*: ", "", str(exc))) from None
            return MetadataOps(dict(value))
        values = value["in"]
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_IN_VALUES:
            raise ValueError(f'"in" takes a list of 1 to {MAX_IN_VALUES} values')
        return tuple(_filter_value(v) for v in values)
    if isinstance(value, list):
        raise ValueError('a list of values is written {"in": [values]}')
    return (_filter_value(value),)


class Schema(BaseModel):
    """Every request and response model here is built on its first use, not at import: a request
    builds only its own route's models (``defer_build``; building all of them was a twentieth of the
    API function's cold import, and no call needs most of them)."""

    model_config = ConfigDict(defer_build=True)


class MetadataIn(Schema):
    """A condition met by any of these values: ``{"in": ["food", "travel"]}``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    in_: list[str | int | float | bool] = Field(
        alias="in", min_length=1, max_length=MAX_IN_VALUES, description="the key holds any of these values"
    )


#: key -> condition; every key must match. Values compare as JSON values do ("1", 1 and true differ).
MetadataFilter = Annotated[
    dict[
        MetadataKey,
        Annotated[
            # tuple[scalar, ...] (equality, in) | MetadataOps (other operators); Any keeps the
            # internal class out of the OpenAPI document (the input schema says what is sent).
            Any,
            PlainValidator(
                _metadata_condition,
                json_schema_input_type=str | int | float | bool | MetadataIn | dict[str, Any],
            ),
        ],
    ],
    Field(
        max_length=MAX_FILTER_KEYS,
        description='memories whose metadata holds these values: {"topic": "food"} (equality), '
        '{"topic": {"in": ["food", "travel"]}} (any of them), {"priority": {"gte": 2, "lt": 5}} (operators '
        + ", ".join(filter_expr.OPERATORS)
        + "); every key must match",
    ),
]


def _expression(value: Any) -> filter_expr.Node:
    try:
        return filter_expr.parse(value)
    except filter_expr.FilterError as exc:
        raise ValueError(str(exc)) from None


#: AND / OR / NOT over conditions on metadata and the record's fields (``domain.filter_expr``)
FilterExpression = Annotated[
    filter_expr.Node,
    PlainValidator(_expression, json_schema_input_type=dict[str, Any]),
    Field(
        description='{"AND": [filters]}, {"OR": [filters]}, {"NOT": filter}, or {field: condition}; fields: '
        "created_at, event_time, category, kind, agent_id, metadata.<key> "
        '(or {"metadata": {key: condition}}); a condition is a value (equality) or {operator: value}, '
        "operators eq, ne, gt, gte, lt, lte, in, nin, "
        'contains; e.g. {"AND": [{"created_at": {"gte": "2026-01-01T00:00:00Z"}}, '
        '{"metadata": {"priority": {"gt": 2}}}]}',
        examples=[{"OR": [{"category": "travel"}, {"metadata": {"priority": {"gte": 3}}}]}],
    ),
]


def merged_expression(*parts: Any) -> Any:
    """The JSON of the AND of the given expressions (``None`` ones left out)."""
    given = [p for p in parts if p is not None]
    if not given:
        return None
    return given[0] if len(given) == 1 else {"AND": given}


# Keys the system itself writes into a record's metadata; a caller may not forge them.
RESERVED_METADATA_KEYS = SYSTEM_METADATA_KEYS


def no_reserved_keys(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value:
        reserved = sorted(RESERVED_METADATA_KEYS & value.keys())
        if reserved:
            raise ValueError(f"keys {reserved} are reserved")
    return value
