"""Hostile-input properties over every route of the OpenAPI document (issue 25).

For every operation schemathesis generates what the schema admits (body,
query and path), and each request is then made hostile in one or more of the
classes that used to answer 500: a lone surrogate in a string, an integer of
5,000 digits (or just past 64 bits), an extreme time in *every* time field, a
control character, a Unicode path segment (accented, CJK, emoji, RTL,
zero-width, a trailing newline). It goes through the real HTTP adapter
(``WsgiApi``: the path as WSGI bytes, the body as raw JSON text). Whatever it
is:

* the answer is 2xx or 4xx, never 5xx, and every 4xx has the one error shape;
* a refused request (4xx) leaves no trace in any store: every table of the
  SQLite file holds as many rows as before, and the marker word it carried is
  nowhere in the bytes of the file, its WAL or its shared memory.

``make test`` runs a bounded number of requests; ``MEMSTACK_PROPERTY_OPERATIONS``
(e.g. 10000) runs the nightly size.
"""

from __future__ import annotations

import io
import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from memstack.api.wsgi_server import WsgiApi
from memstack.factory import build_service
from memstack.settings import load_settings
from schemathesis import GenerationMode

from tests.reliability.traces import file_bytes, table_counts

OPERATIONS = int(os.environ.get("MEMSTACK_PROPERTY_OPERATIONS", "390"))
AUTH = "Bearer dev-key"
DATE_FIELDS = ("timestamp", "event_time", "reference_time", "after", "before")

# Raw JSON text for values the JSON encoder would never write.
SURROGATES = ['"\\ud800"', '"x\\udfffy"', '"\\ud83d"', '"\\udbff\\u0041"']
HUGE_INTEGERS = ["9" * 5000, "-" + "1" * 4400, str(2**64), str(-(2**63) - 1)]
EXTREME_TIMES = [
    "9999-12-31T23:59:59-14:00",
    "0001-01-01T00:00:00+14:00",
    "1066-10-14T09:00:00Z",
    "2999-01-01",
    "1899-12-31T23:59:59Z",
]
CONTROL = ["bad\x00byte", "bell\x07", "esc\x1b[2J", "trailing\n", "del\x7f", "\r\n"]
UNICODE = ["café", "日本語", "🙂emoji", "\u202eevil", "zero\u200bwidth", "ü" * 300, "nlu\n", "..", "a%2Fb"]


class Raw:
    """A JSON value written as this text exactly (a surrogate escape, a 5,000-digit integer)."""

    def __init__(self, text: str) -> None:
        self.text = text


def dumps(value: Any) -> str:
    """``json.dumps`` that writes ``Raw`` values as their text."""
    raws: dict[str, str] = {}

    def default(o: Any) -> Any:
        if isinstance(o, Raw):
            token = f"@@raw{len(raws)}@@"
            raws[token] = o.text
            return token
        raise TypeError(type(o).__name__)

    text = json.dumps(value, default=default, ensure_ascii=False)
    for token, raw in raws.items():
        text = text.replace(json.dumps(token), raw)
    return text


hostile_scalar = st.one_of(
    st.sampled_from(SURROGATES).map(Raw),
    st.sampled_from(HUGE_INTEGERS).map(Raw),
    st.sampled_from(EXTREME_TIMES),
    st.sampled_from(CONTROL),
    st.sampled_from(UNICODE),
)


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for part in path[:-1]:
        value = value[part]
    value[path[-1]] = new


def _times_everywhere(value: Any, stamp: str) -> Any:
    """Every time field of the body (at any depth) set to ``stamp``."""
    if isinstance(value, dict):
        return {k: stamp if k in DATE_FIELDS else _times_everywhere(v, stamp) for k, v in value.items()}
    if isinstance(value, list):
        return [_times_everywhere(v, stamp) for v in value]
    return value


def _marked(value: Any, mark: str) -> Any:
    """Free text (content, query, speaker) carries the request's marker word, for the byte scan."""
    if isinstance(value, dict):
        text = ("content", "query", "speaker")
        return {
            k: f"{mark} {v}" if k in text and isinstance(v, str) else _marked(v, mark)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_marked(v, mark) for v in value]
    return value


class Http:
    """HTTP requests into the local server's WSGI app, with the path as raw (UTF-8) bytes."""

    def __init__(self, app: WsgiApi) -> None:
        self.app = app

    def __call__(
        self, method: str, path: str, query: dict[str, Any] | None, body: str | None
    ) -> tuple[int, dict[str, Any] | None]:
        raw_path = path.encode("utf-8", "surrogatepass")
        data = body.encode("utf-8", "surrogatepass") if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            # WSGI: the percent-decoded path bytes, each as one latin-1 character.
            "PATH_INFO": raw_path.decode("latin-1"),
            "QUERY_STRING": urlencode(
                {k: v if isinstance(v, str) else json.dumps(v) for k, v in (query or {}).items()}, doseq=False
            ),
            "CONTENT_LENGTH": str(len(data)),
            "CONTENT_TYPE": "application/json",
            "HTTP_AUTHORIZATION": AUTH,
            "wsgi.input": io.BytesIO(data),
        }
        seen: dict[str, str] = {}
        chunks = self.app(environ, lambda status, headers: seen.setdefault("status", status))
        payload = b"".join(chunks)
        status = int(seen["status"].split()[0])
        return status, (json.loads(payload) if payload else None)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Any, Http, Path]]:
    app_settings = load_settings(data_dir=tmp_path / "hostile", embedder="hashing", sync_timeout_seconds=30)
    service = build_service(app_settings)
    api = WsgiApi(service, app_settings)
    # A user with memories, so that reads, edits and erases have something to act on.
    seed = {
        "user_id": "alice",
        "sync": True,
        "messages": [{"role": "user", "content": "I moved to Lisbon and adopted a cat named Miso."}],
    }
    http = Http(api)
    assert http("POST", "/v1/memories", None, json.dumps(seed))[0] == 200
    yield schemathesis.openapi.from_wsgi("/openapi.json", api), http, app_settings.db_path
    api.close()
    service.close()


def _path(template: str, params: dict[str, Any], hostile: str | None) -> str:
    out = template
    for name in re.findall(r"{(\w+)}", template):
        value = hostile if hostile is not None else str(params.get(name, "x"))
        out = out.replace("{" + name + "}", value.replace("/", quote("/")))
    return out


def _runner(
    operation: Any, http: Http, db_path: Path, examples: int, counts: dict[str, int], attempt: int
) -> Any:
    """The hypothesis test of one operation: schema-admitted requests, made hostile, sent and checked."""
    method, template = operation.method.upper(), operation.path
    has_path_params = bool(re.findall(r"{(\w+)}", template))

    @given(
        case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
        classes=st.sets(st.sampled_from(["leaf", "times", "path", "query"]), min_size=1),
        scalar=hostile_scalar,
        segment=st.sampled_from(UNICODE + CONTROL),
        stamp=st.sampled_from(EXTREME_TIMES),
        pick=st.integers(0, 10_000),
    )
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @seed(attempt)
    def run(case: Any, classes: set[str], scalar: Any, segment: str, stamp: str, pick: int) -> None:
        mark = f"mark{uuid.uuid4().hex[:12]}"
        applied: set[str] = set()  # the hostile classes this request really carries
        body = case.body if isinstance(case.body, dict | list) else None
        if body is not None:
            body = _marked(body, mark)
            if "times" in classes:
                timed = _times_everywhere(body, stamp)
                applied |= {"times"} if timed != body else set()
                body = timed
            leaves = list(_leaves(body))
            if "leaf" in classes and leaves and leaves[0][0]:
                _set(body, leaves[pick % len(leaves)][0], scalar)
                applied.add("leaf")
        query = dict(case.query or {})
        if "times" in classes and any(k in DATE_FIELDS for k in query):
            query = {k: (stamp if k in DATE_FIELDS else v) for k, v in query.items()}
            applied.add("times")
        hostile_segment = segment if "path" in classes and has_path_params else None
        if hostile_segment is not None:
            applied.add("path")
        if "query" in classes or not applied:  # never a request with no hostile class in it
            names = sorted(query) or ["user_id"]
            query[names[pick % len(names)]] = scalar.text if isinstance(scalar, Raw) else scalar
            applied.add("query")
        for name in applied:
            counts[name] = counts.get(name, 0) + 1
        path = _path(template, dict(case.path_parameters or {}), hostile_segment)
        before = table_counts(db_path)
        status, answer = http(method, path, query, dumps(body) if body is not None else None)
        counts["requests"] += 1
        assert status < 500, (method, path, query, body, status, answer)
        if status >= 400:
            counts["refused"] += 1
            assert answer is not None and set(answer) == {"error"}, answer
            assert {"code", "message", "details"} <= set(answer["error"]), answer
            assert table_counts(db_path) == before, (method, path, status, answer)
            assert mark.encode() not in file_bytes(db_path.parent), (method, path, answer)

    return run


def _exercise(operation: Any, http: Http, db_path: Path, quota: int, counts: dict[str, int]) -> int:
    """Send ``quota`` hostile requests to one operation; the number actually sent.

    Hypothesis may end a run short of ``max_examples`` (it stops when it has
    tried what it considers the whole space, or filters too much), so runs are
    repeated with fresh seeds until the quota is met. A run that sends nothing
    new means the operation's space is exhausted.
    """
    start = counts["requests"]
    for attempt in range(50):
        sent = counts["requests"] - start
        if sent >= quota:
            break
        try:
            _runner(operation, http, db_path, quota - sent, counts, attempt)()
        except Unsatisfiable:
            break
        if counts["requests"] - start == sent:
            break
    return counts["requests"] - start


def test_hostile_requests_never_answer_5xx_and_a_refused_one_leaves_no_trace(world) -> None:
    schema, http, db_path = world
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 18  # every documented route
    quota = max(2, -(-OPERATIONS // len(operations)))
    counts: dict[str, int] = {"requests": 0, "refused": 0}
    short: dict[str, int] = {}
    for operation in operations:
        sent = _exercise(operation, http, db_path, quota, counts)
        if sent < quota:
            short[f"{operation.method.upper()} {operation.path}"] = sent
    # shown with -s: requests, refused, and how many carried each hostile class
    print(f"hostile requests: {counts}, short: {short}")
    # Every operation got its share: the run really is OPERATIONS requests, not "about half".
    assert not short, short
    assert counts["requests"] >= OPERATIONS, counts
    assert counts["refused"] > 0
