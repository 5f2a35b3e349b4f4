"""What a metadata filter means, defined once for every backend: typed equality and ``in`` on keys.

A filter maps keys to the values a memory's metadata may hold there: one
value is equality, several are ``in``. Every key must match (AND), any of a
key's values may (OR). Values compare as JSON values do, by type: a string
equals only the same string, a boolean only the same boolean, a number any
equal number (``1`` equals ``1.0``); ``"1"``, ``1`` and ``true`` are three
different values. A key the memory lacks, or holds ``null`` or a list at,
matches nothing.

Backends that look values up in an index store each scalar of a memory's
metadata as one typed term (``topic=s:food``, ``n=n:1``, ``done=b:true``):
the embedded store's ``memory_terms`` table, OpenSearch's ``metadata_terms``
keyword field and the DynamoDB snapshot's term index. Two values are equal
exactly when their terms are, so every backend answers the same.
(PostgreSQL's ``jsonb @>`` containment compares the same way.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Scalar = str | int | float | bool
#: key -> the values it may hold (one: equality; several: ``in``)
MetadataConditions = Mapping[str, Sequence[Scalar]]


def _number(value: int | float) -> str:
    # Integral floats are written as the integer they equal, so 1 and 1.0 give one term.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def term(key: str, value: Any) -> str | None:
    """The typed term of ``key`` holding ``value``; ``None`` for a value no filter can match."""
    if isinstance(value, bool):  # before int: a bool is an int to Python, not to JSON
        return f"{key}=b:{'true' if value else 'false'}"
    if isinstance(value, int | float):
        return f"{key}=n:{_number(value)}"
    if isinstance(value, str):
        return f"{key}=s:{value}"
    return None


def record_terms(metadata: Mapping[str, Any]) -> list[str]:
    """The terms of a memory's metadata (its scalar values), sorted."""
    return sorted(t for k, v in metadata.items() if (t := term(k, v)) is not None)


def wanted_terms(key: str, values: Iterable[Scalar]) -> list[str]:
    """The terms any of which satisfies the condition on ``key``."""
    return sorted({t for v in values if (t := term(key, v)) is not None})


def matches(metadata: Mapping[str, Any], conditions: MetadataConditions | None) -> bool:
    """True when ``metadata`` satisfies every condition (no conditions: always)."""
    if not conditions:
        return True
    have = set(record_terms(metadata))
    return all(have.intersection(wanted_terms(key, values)) for key, values in conditions.items())
