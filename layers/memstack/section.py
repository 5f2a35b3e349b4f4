"""A section of the configuration: a typed, frozen group of settings that one part of memstack reads.

Each section's fields are its defaults and its checks, written once. ``Settings``
(``memstack.settings``) is made of sections and reads each field from the
environment variable ``MEMSTACK_<NAME>``, where the name is the field's alias
when it has one (``candidate_pool`` is ``MEMSTACK_RETRIEVAL_POOL``) and else the
field's own name. Two sections may declare the same name (they inherit it from
one base, e.g. ``Matryoshka.coarse_dim``): one variable then sets both.

A field made with ``fixed(...)`` belongs to the object but is no setting (it is
wired in by the factory, or constant): no variable reads it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

_FIXED: JsonDict = {"memstack_setting": False}


class Section(BaseModel):
    # Built by field name in code and tests, by alias (the variable's name) from the environment.
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        arbitrary_types_allowed=True,
    )


def fixed(default: Any = None, **kwargs: Any) -> Any:
    """A field of a section that no environment variable sets (``default_factory`` is allowed)."""
    if "default_factory" in kwargs:
        return Field(json_schema_extra=_FIXED, **kwargs)
    return Field(default, json_schema_extra=_FIXED, **kwargs)


def is_setting(extra: object) -> bool:
    """Whether a field (its ``json_schema_extra``) is read from the environment."""
    return not (isinstance(extra, dict) and extra.get("memstack_setting") is False)
