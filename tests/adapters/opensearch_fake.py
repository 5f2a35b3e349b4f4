"""A real opensearch-py client over a recording connection: requests captured, recorded answers replayed.

Everything above the HTTP layer is the real library (URL building, NDJSON
serialisation of bulk/msearch bodies, error classes), so the tests see the
exact requests the store would put on the wire.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from opensearchpy import OpenSearch
from opensearchpy.connection import Connection


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, Any]
    body: Any

    @property
    def lines(self) -> list[dict[str, Any]]:
        """An NDJSON body (bulk, msearch) as its JSON lines."""
        assert isinstance(self.body, str)
        return [json.loads(line) for line in self.body.splitlines() if line.strip()]


@dataclass
class Recorder:
    requests: list[Request] = field(default_factory=list)
    answers: deque[tuple[int, Any]] = field(default_factory=deque)
    #: answers every request no recorded answer is left for (tests/infra/opensearch_wire.py)
    respond: Callable[[Request], tuple[int, Any]] | None = None

    def reply(self, status: int, body: Any = None) -> None:
        self.answers.append((status, body if body is not None else {}))


class RecordingConnection(Connection):
    def __init__(self, recorder: Recorder | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        assert recorder is not None
        self.recorder = recorder

    def perform_request(  # type: ignore[override]
        self,
        method: str,
        url: str,
        params: Any = None,
        body: Any = None,
        timeout: Any = None,
        ignore: Any = (),
        headers: Any = None,
    ) -> tuple[int, dict[str, str], str]:
        if isinstance(body, bytes):
            body = body.decode()
        parsed: Any = body
        if isinstance(body, str) and not (url.endswith("/_bulk") or url.endswith("/_msearch")):
            parsed = json.loads(body)
        plain = {k: v.decode() if isinstance(v, bytes) else v for k, v in (params or {}).items()}
        request = Request(method, unquote(url), plain, parsed)
        self.recorder.requests.append(request)
        if self.recorder.answers:
            status, answer = self.recorder.answers.popleft()
        elif self.recorder.respond is not None:
            status, answer = self.recorder.respond(request)
        else:
            raise AssertionError(f"unexpected request {method} {url}")
        raw = json.dumps(answer)
        if not 200 <= status < 300 and status not in ignore:
            self._raise_error(status, raw, "application/json")
        return status, {"content-type": "application/json"}, raw


def recording_client(recorder: Recorder) -> OpenSearch:
    return OpenSearch(
        hosts=[{"host": "search.test", "port": 443}],
        connection_class=RecordingConnection,
        recorder=recorder,
        max_retries=0,
    )
