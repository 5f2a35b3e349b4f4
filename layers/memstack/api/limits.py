"""Limits that come from ``Settings``, checked on the whole request before anything is stored.

Each violation names the field (``messages[3].content``) so a caller can fix
it; all violations are reported at once.
"""

from __future__ import annotations

import base64
import re
from datetime import datetime
from typing import Any

from memstack.api.schemas import AddMemoriesRequest, SearchMemoriesRequest, UpdateMemoryRequest
from memstack.errors import BadRequest, PayloadTooLarge, ValidationFailed
from memstack.factory import time_bounds
from memstack.settings import Settings

# A JSON string (escapes included) or one bracket: what the depth scan steps over.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class MalformedBody(BadRequest):
    """The body cannot even be read as JSON text (same code as a JSON syntax error)."""

    code = "malformed_json"


def _problem(field: str, message: str) -> dict[str, Any]:
    return {"field": field, "location": "body", "message": message, "type": "limit_exceeded"}


def _raise_if(problems: list[dict[str, Any]]) -> None:
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValidationFailed(f"{first['field']}: {first['message']}{more}", problems)


def json_depth_exceeds(text: str, limit: int) -> bool:
    """True when JSON ``text`` nests more than ``limit`` deep (brackets inside strings do not count).

    Checked before the body is parsed: a parser (and pydantic after it) recurses
    once per level, so 1,000 levels would end in ``RecursionError``.
    """
    if text.count("[") + text.count("{") <= limit:  # the common case, at C speed
        return False
    depth = 0
    for token in _JSON_TOKEN.finditer(text):
        bracket = token.group(0)
        if bracket in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif bracket in ("]", "}"):
            depth -= 1
    return False


def check_body_size(body: str | None, is_base64: bool, settings: Settings) -> None:
    """The body fits the size and nesting limits and, when API Gateway passed it base64-encoded, is UTF-8."""
    if body is None:
        return
    text = body
    if is_base64:
        try:
            text = base64.b64decode(body.encode("ascii"), validate=True).decode("utf-8")
        except (ValueError, UnicodeError) as exc:
            raise MalformedBody(
                "the request body is not UTF-8 encoded JSON",
                [{"field": "body", "location": "body", "message": "not UTF-8", "type": "json_invalid"}],
            ) from exc
    size = len(body) * 3 // 4 if is_base64 else len(body.encode("utf-8", errors="surrogatepass"))
    if size > settings.api.max_body_bytes:
        raise PayloadTooLarge(
            f"the request body is {size} bytes; the limit is {settings.api.max_body_bytes}",
            [
                {
                    "field": "body",
                    "location": "body",
                    "message": f"at most {settings.api.max_body_bytes} bytes",
                    "type": "payload_too_large",
                }
            ],
        )
    if json_depth_exceeds(text, settings.api.max_json_depth):
        _raise_if([_problem("body", f"JSON may nest at most {settings.api.max_json_depth} levels deep")])


def check_times(settings: Settings, location: str, **values: datetime | None) -> None:
    """Every given time (keyword = field name, ``filters__after`` = ``filters.after``) is in range."""
    named = [(name.replace("__", "."), value) for name, value in values.items()]
    time_bounds(settings).check(named, location)


def check_add(req: AddMemoriesRequest, settings: Settings) -> None:
    problems = []
    most = settings.api.max_messages_per_request
    if len(req.messages) > most:
        problems.append(
            _problem(
                "messages",
                f"at most {most} messages per request, got {len(req.messages)}",
            )
        )
    # No limit per message: a message may be as long as the body allows (pasted logs, code and
    # long replies are normal); ingest indexes a long one in chunks (domain/chunks.py).
    ids = [m.id for m in req.messages if m.id is not None]
    if len(ids) != len(set(ids)):
        dup = next(i for i in ids if ids.count(i) > 1)
        problems.append(
            {
                "field": "messages",
                "location": "body",
                "message": f"message id {dup!r} appears more than once",
                "type": "duplicate_id",
            }
        )
    _raise_if(problems)


def check_search(req: SearchMemoriesRequest, settings: Settings) -> None:
    problems = []
    if len(req.query) > settings.api.max_query_chars:
        problems.append(
            _problem("query", f"at most {settings.api.max_query_chars} characters, got {len(req.query)}")
        )
    if req.top_k > settings.api.max_top_k:
        problems.append(_problem("top_k", f"must be between 1 and {settings.api.max_top_k}, got {req.top_k}"))
    f = req.filters
    problems += time_bounds(settings).problems(
        [
            ("reference_time", req.reference_time),
            ("filters.after", f.after if f else None),
            ("filters.before", f.before if f else None),
        ]
    )
    _raise_if(problems)


def check_update(req: UpdateMemoryRequest, settings: Settings) -> None:
    if req.content is not None and len(req.content) > settings.api.max_message_chars:
        _raise_if(
            [
                _problem(
                    "content", f"at most {settings.api.max_message_chars} characters, got {len(req.content)}"
                )
            ]
        )
