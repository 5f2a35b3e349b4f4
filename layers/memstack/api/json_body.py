"""How a request's JSON text becomes Python values: one parser for every body and JSON query value.

Two things ``json.loads`` lets through broke requests after validation:

* an integer of more digits than Python converts (4,300) raised ``ValueError``
  inside the parser, which no handler expected (500). Such a number is parsed
  into ``OversizedInteger``, which no field accepts, so the request answers 422
  naming the field;
* a string holding a lone surrogate (``"\\ud800"``) is valid JSON syntax but not
  Unicode text: every model accepted it and the store failed to encode it after
  the first write (500, and half a request stored). It is refused here, before
  any route runs, naming where it is.

This module imports nothing from Powertools: the request models use
``OversizedInteger`` and the client shares them.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from memstack.errors import ValidationFailed

#: the most digits an integer may have (Python's own conversion limit)
MAX_INTEGER_DIGITS = sys.get_int_max_str_digits() or 4300


# Only an escape can put a surrogate into a parsed string (the text itself is valid UTF-8).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class OversizedInteger:
    """A JSON integer with more than ``MAX_INTEGER_DIGITS`` digits (never a valid value)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def _integer(text: str) -> int | OversizedInteger:
    digits = len(text) - text.startswith("-")
    return int(text) if digits <= MAX_INTEGER_DIGITS else OversizedInteger(digits)


def _surrogate_at(value: Any, where: str) -> str | None:
    """The field path of the first string (or key) holding a lone surrogate, if any."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where or "body"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{where}.{key}" if where else str(key)
            found = _surrogate_at(key, inner) or _surrogate_at(item, inner)
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _surrogate_at(item, f"{where}[{i}]")
            if found:
                return found
    return None


def loads(text: str | bytes, location: str = "body", field: str = "") -> Any:
    """``json.loads`` for request input: oversized integers kept as a marker, lone surrogates refused.

    Raises ``json.JSONDecodeError`` for invalid JSON, ``ValidationFailed`` (422)
    for text that is not Unicode; ``field`` names the value (a query parameter).
    """
    value = json.loads(text, parse_int=_integer)
    plain = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
    where = _surrogate_at(value, field) if _SURROGATE_ESCAPE.search(plain) else None
    if where is not None:
        raise ValidationFailed(
            f"{where}: holds a lone surrogate (such as \\ud800), which is not Unicode text",
            [
                {
                    "field": where,
                    "location": location,
                    "message": "a lone surrogate is not Unicode text",
                    "type": "invalid_unicode",
                }
            ],
        )
    return value
