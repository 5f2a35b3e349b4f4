"""A user's memories out and in over REST: ``GET /v1/users/{id}/export``, ``POST /v1/users/{id}/import``.

The export is JSON lines, the format ``memstack export`` writes (a header line, then one
record per line with its embedding). Behind API Gateway the API Lambda's answer is
buffered and at most 6 MB, so an export is paged: each answer is one page (``limit``
versions, cut to ``MEMSTACK_MAX_EXPORT_PAGE_BYTES`` as the Lambda answer counts it) whose
header line carries ``next_cursor``; the clients follow it. ``memstack serve`` streams a
whole export in one chunked answer instead when neither ``cursor`` nor ``limit`` is given
(``wsgi_server``).

An import is the same lines as the request body (at most ``MEMSTACK_MAX_BODY_BYTES``; the
clients send a long export in several requests, each with the header line). Every line is
checked before anything is written; ids are kept (or, for another owner, derived from the
old ones), so sending a request again skips what is there. The records become the user of
the path, in the caller's tenant, whatever the file says.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from pydantic import TypeAdapter, ValidationError

from memstack.api.errors import error_responses
from memstack.api.responses import json_response
from memstack.api.routes_memories import reject_unknown_query
from memstack.api.schemas import ID_PATTERN, IdStr, ImportUserResponse, MetadataKey, MetadataValue
from memstack.domain.transfer import export_header, parse_export
from memstack.errors import BadRequest, NotFound, ValidationFailed
from memstack.factory import time_bounds
from memstack.models import MemoryRecord
from memstack.settings import Settings

if TYPE_CHECKING:
    from memstack.api.app import ApiDeps, MemstackResolver

NDJSON = "application/x-ndjson"
EXPORT_ROUTE = "/v1/users/<user_id>/export"
DEFAULT_EXPORT_LIMIT = 200
#: versions per page at most (each may need a read of its successor, and the API has 29 s)
MAX_EXPORT_LIMIT = 1000
#: what an imported embedding may hold at most (the widest embedder is 1024-d)
MAX_EMBEDDING_DIM = 8192
UserIdPath = Annotated[str, Path(min_length=1, max_length=128, pattern=ID_PATTERN)]
# The API's own rules for what an imported record holds.
_ID: TypeAdapter[str] = TypeAdapter(IdStr)
_KEY: TypeAdapter[str] = TypeAdapter(MetadataKey)
_VALUE: TypeAdapter[Any] = TypeAdapter(MetadataValue)

_EXPORT_DESCRIPTION = (
    "JSON lines: a header (format, version, user_id, embedder, embedding_dim, next_cursor), then one "
    "record per line, newest first, every version and tombstone, with its embedding. A page holds at "
    "most `limit` versions and fits the API Lambda's 6 MB answer; follow `next_cursor` until it is null. "
    "`memstack serve` streams the whole export in one answer when neither cursor nor limit is given."
)
_IMPORT_BODY = {
    "required": True,
    "description": "an export's lines: its header line, then records (at most MEMSTACK_MAX_BODY_BYTES)",
    "content": {NDJSON: {"schema": {"type": "string"}}},
}


def lambda_answer_bytes(line: str) -> int:
    """What ``line`` and its newline take in a Lambda proxy answer: escaped inside its JSON body string.

    ``ensure_ascii`` escaping is the longest form either way the answer is written (a character
    is at most 6 bytes as ``\\uXXXX``, 4 as UTF-8); its two quotes stand for the ``\\n``.
    """
    return len(json.dumps(line))


def register(app: MemstackResolver, deps: ApiDeps) -> None:
    service, settings = deps.service, deps.settings

    @app.get(
        EXPORT_ROUTE,
        summary="Export a user's memories: every version, with embeddings, as JSON lines (a page at a time)",
        description=_EXPORT_DESCRIPTION,
        tags=["users"],
        responses={
            200: {"description": "a page of the export", "content": {NDJSON: {"schema": {"type": "string"}}}},
            **error_responses(400, 401, 404, 413, 422),
        },
    )
    def export_user(
        user_id: UserIdPath,
        cursor: Annotated[str | None, Query(max_length=1024)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_EXPORT_LIMIT)] = DEFAULT_EXPORT_LIMIT,
        embeddings: Annotated[bool, Query(description="false: no vectors (an import embeds again)")] = True,
    ):
        reject_unknown_query(app, frozenset({"cursor", "limit", "embeddings"}))
        lines, next_cursor = service.export_page(
            app.tenant(),
            user_id,
            limit=limit,
            cursor=cursor or None,
            embeddings=embeddings,
            max_bytes=settings.api.max_export_page_bytes,
            size=lambda_answer_bytes,
        )
        if not lines and not cursor:
            raise NotFound(f"user {user_id!r} has no memories in this tenant")
        header = export_header(service.embedder, user_id, next_cursor=next_cursor)
        body = "".join(line + "\n" for line in [json.dumps(header, ensure_ascii=False), *lines])
        return Response(status_code=200, content_type=NDJSON, body=body)

    @app.post(
        "/v1/users/<user_id>/import",
        summary="Import an export (JSON lines) as this user: checked whole first, what is there is skipped",
        tags=["users"],
        responses={
            200: {
                "description": "what was written and what was already there",
                "content": {"application/json": {"model": ImportUserResponse}},
            },
            **error_responses(401, 413, 422),
        },
        openapi_extensions={"requestBody": _IMPORT_BODY},
    )
    def import_user(user_id: UserIdPath):
        reject_unknown_query(app, frozenset())
        tenant = app.tenant()
        text = app.current_event.decoded_body or ""
        try:
            header, numbered = parse_export(text.splitlines(), tenant)
        except BadRequest as exc:
            raise ValidationFailed(exc.message, [_problem("body", exc.message)]) from None
        check_import(numbered, settings)
        report = service.import_records(tenant, user_id, header, [r for _, r in numbered])
        return json_response(200, {"user_id": user_id, **report.as_dict()})


def _problem(field: str, message: str) -> dict[str, Any]:
    return {"field": field, "location": "body", "message": message, "type": "invalid_export"}


def check_import(numbered: list[tuple[int, MemoryRecord]], settings: Settings) -> None:
    """Every record holds what the API itself would accept; all problems at once, nothing written."""
    problems: list[dict[str, Any]] = []
    bounds = time_bounds(settings)
    for number, record in numbered:
        line = f"line {number}"
        problems += [_problem(f"{line}: {name}", message) for name, message in record_problems(record)]
        times = [("created_at", record.created_at), ("event_time", record.event_time)]
        for found in bounds.problems([(f"{line}: {name}", value) for name, value in times]):
            problems.append({**found, "type": "invalid_export"})
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ValidationFailed(f"{problems[0]['field']}: {problems[0]['message']}{more}", problems)


def record_problems(record: MemoryRecord) -> list[tuple[str, str]]:
    """(field, what is wrong) for an imported record: ids a route can address, labels the API
    would keep (a list of them too), a finite embedding."""
    found: list[tuple[str, str]] = []
    ids = [("id", record.id), ("replaces_id", record.replaces_id), ("session_id", record.session_id)]
    ids += [(f"source_ids[{i}]", s) for i, s in enumerate(record.source_ids)]
    ids += [(f"conflicts_with[{i}]", c) for i, c in enumerate(record.conflicts_with)]
    for name, value in ids:
        if value is not None and not _valid(_ID, value):
            found.append((name, f"{value[:40]!r} is not an id (letters, digits and ._@:+=-, at most 128)"))
    for key, value in record.metadata.items():
        if not _valid(_KEY, key):
            found.append((f"metadata.{key[:40]}", "a key is 1 to 64 letters, digits, '_', '.' or '-'"))
        elif not all(_valid(_VALUE, item) for item in (value if isinstance(value, list) else [value])):
            found.append((f"metadata.{key}", "a value is a short string, a number, a boolean or null"))
    vector = record.embedding_full
    if vector is not None and (len(vector) > MAX_EMBEDDING_DIM or not all(map(math.isfinite, vector))):
        found.append(("embedding_full", f"at most {MAX_EMBEDDING_DIM} finite numbers"))
    return found


def _valid(adapter: TypeAdapter[Any], value: Any) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True
