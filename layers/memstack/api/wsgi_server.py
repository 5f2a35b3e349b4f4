"""``memstack serve``: the REST resolver behind a real, concurrent WSGI server (waitress).

Each HTTP request becomes an API Gateway REST proxy event, goes through the
very resolver the API Lambda runs, and the proxy response goes back as HTTP.
waitress runs requests on a pool of threads; every thread gets its own
resolver (``create_app`` is cheap) because a resolver holds the request it is
resolving. The ``MemoryService`` is shared: the embedded store gives each
thread its own SQLite connection.

One structured log line per request (Powertools Logger, JSON on stdout).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Unpack
from urllib.parse import parse_qs

from aws_lambda_powertools import Logger, Metrics

from memstack.api.app import UNMATCHED_ROUTE, MemstackResolver, close_app, create_app
from memstack.api.auth import ApiKeyAuthenticator, Authenticator
from memstack.api.errors import error_body, http_status
from memstack.api.idempotency import build_persistence
from memstack.api.routes_transfer import EXPORT_ROUTE
from memstack.errors import MemstackError
from memstack.service import MemoryService
from memstack.settings import Settings

if TYPE_CHECKING:
    from memstack.api.guarded_server import Listen, ServerLimits

logger = Logger(service="memstack-api")

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _status_line(code: int) -> str:
    try:
        return f"{code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"{code} Unknown"


def request_path(environ: dict[str, Any]) -> str | None:
    """The request path as text: the percent-decoded bytes read as UTF-8, as API Gateway does.

    WSGI hands ``PATH_INFO`` over as those bytes, each one a latin-1 character
    (PEP 3333), so "café" arrived as "cafÃ©" and answered 404. ``None``: the
    bytes are not UTF-8 (the caller gets 400).
    """
    raw = environ.get("PATH_INFO") or "/"
    try:
        return raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        return None


def wsgi_to_event(environ: dict[str, Any], body: bytes) -> dict[str, Any]:
    """An API Gateway REST (v1) proxy event for this WSGI request."""
    path = request_path(environ) or "/"
    headers: dict[str, str] = {}
    multi_headers: dict[str, list[str]] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:].replace("_", "-").title()
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            name = key.replace("_", "-").title()
        else:
            continue
        headers[name] = value
        multi_headers[name] = [value]
    query = parse_qs(environ.get("QUERY_STRING") or "", keep_blank_values=True)
    try:
        text: str | None = body.decode("utf-8") if body else None
        is_base64 = False
    except UnicodeDecodeError:
        # Not UTF-8: pass it on as API Gateway would, base64-encoded; JSON parsing then fails cleanly.
        text, is_base64 = base64.b64encode(body).decode("ascii"), True
    request_id = headers.get("X-Request-Id") or uuid.uuid4().hex
    return {
        "resource": path,
        "path": path,
        "httpMethod": (environ.get("REQUEST_METHOD") or "GET").upper(),
        "headers": headers,
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "requestId": request_id,
            "stage": "local",
            "path": path,
            "httpMethod": (environ.get("REQUEST_METHOD") or "GET").upper(),
            "identity": {"sourceIp": environ.get("REMOTE_ADDR")},
            "requestTimeEpoch": int(time.time() * 1000),
        },
        "body": text,
        "isBase64Encoded": is_base64,
    }


def export_streamed(route: str, event: dict[str, Any]) -> bool:
    """An export asked for whole (no cursor, no limit): ``memstack serve`` streams every page of it."""
    query = event.get("queryStringParameters") or {}
    return route == EXPORT_ROUTE and "cursor" not in query and "limit" not in query


class WsgiApi:
    """The WSGI application: HTTP in, proxy event through the resolver, HTTP out."""

    def __init__(
        self, service: MemoryService, settings: Settings, authenticator: Authenticator | None = None
    ) -> None:
        self.service = service
        self.settings = settings
        self.authenticator = authenticator or ApiKeyAuthenticator(settings.api_key_map())
        # Other WSGI apps served under a path prefix (the MCP endpoint), behind the same authentication.
        self._mounts: dict[str, WsgiApp] = {}
        self.metrics = Metrics(namespace="memstack", service="memstack-api")
        # One idempotency store for all threads (it is a SQLite file with per-thread connections).
        self.persistence, self._close_persistence = build_persistence(settings)
        self._local = threading.local()
        self._apps: list[MemstackResolver] = []
        self._apps_lock = threading.Lock()

    def resolver(self) -> MemstackResolver:
        app: MemstackResolver | None = getattr(self._local, "app", None)
        if app is None:
            app = create_app(
                self.service,
                self.settings,
                self.authenticator,
                metrics=self.metrics,
                persistence=self.persistence,
            )
            self._local.app = app
            with self._apps_lock:
                self._apps.append(app)
        return app

    def mount(self, prefix: str, app: WsgiApp) -> None:
        """Serve ``app`` at ``prefix`` (and below it), for callers the API's authenticator accepts."""
        self._mounts[prefix.rstrip("/")] = app

    def _mount_prefix(self, path: str) -> str | None:
        for prefix in self._mounts:
            if path == prefix or path.startswith(prefix + "/"):
                return prefix
        return None

    def _mounted(self, path: str) -> WsgiApp | None:
        prefix = self._mount_prefix(path)
        return None if prefix is None else self._mounts[prefix]

    def _call_mounted(
        self, app: WsgiApp, environ: dict[str, Any], start_response: StartResponse
    ) -> tuple[int, Iterable[bytes]]:
        """Authenticate as the API does, then hand the request to ``app``; returns (status, body)."""
        seen: dict[str, int] = {}

        def recording_start(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
            seen["status"] = int(status.split(" ", 1)[0])
            return start_response(
                status, [*headers, ("X-Request-Id", environ["memstack.request_id"])], *exc_info
            )

        headers = wsgi_to_event(environ, b"")["headers"]
        try:
            self.authenticator.tenant({"headers": headers})
        except MemstackError as exc:
            payload = error_body(exc.code, exc.message, exc.details).encode()
            recording_start(
                _status_line(http_status(exc)),
                [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))],
            )
            return http_status(exc), [payload]
        body = list(app(environ, recording_start))
        return seen.get("status", 500), body

    def _read_body(self, environ: dict[str, Any]) -> bytes | None:
        """The body, or ``None`` when it is larger than the limit (read no more than that)."""
        limit = self.settings.api.max_body_bytes
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            return None
        stream = environ["wsgi.input"]
        data = stream.read(limit + 1) if length == 0 else stream.read(length)
        return None if len(data) > limit else data

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = time.perf_counter()
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO") or "/"
        request_id = environ.get("HTTP_X_REQUEST_ID") or uuid.uuid4().hex
        mounted = self._mounted(path)
        if mounted is not None:
            environ["memstack.request_id"] = request_id
            status, chunks = self._call_mounted(mounted, environ, start_response)
            self._log_request(method, self._mount_prefix(path), status, started, request_id, environ)
            return chunks
        body = self._read_body(environ)
        route = UNMATCHED_ROUTE
        if request_path(environ) is None:
            status = 400
            payload = error_body("bad_path", "the request path is not UTF-8 once percent-decoded").encode()
            headers = [("Content-Type", "application/json")]
        elif body is None:
            status = 413
            payload = error_body(
                "payload_too_large",
                f"the request body is larger than {self.settings.api.max_body_bytes} bytes",
            ).encode()
            headers = [("Content-Type", "application/json")]
        else:
            event = wsgi_to_event(environ, body)
            event["requestContext"]["requestId"] = request_id
            route = self.resolver().route_template(event["httpMethod"], event["path"])
            try:
                result = self.resolver().resolve(event, None)
                status, payload, headers = self._from_proxy(result)
            except Exception:  # the resolver maps errors itself; this is a last line of defence
                logger.exception("local server failed to resolve a request")
                status = 500
                payload = error_body("internal_error", "the server failed to handle this request").encode()
                headers = [("Content-Type", "application/json")]
            if status == 200 and method == "GET" and export_streamed(route, event):
                # No Content-Length: waitress sends the pages as they are read (chunked).
                headers = [h for h in headers if h[0].lower() != "content-length"]
                start_response(_status_line(status), [*headers, ("X-Request-Id", request_id)])
                self._log_request(method, route, status, started, request_id, environ)
                self.metrics.clear_metrics()
                return self._export_pages(event, payload)
        # A HEAD answer declares the length its GET's content has (the resolver's); others their own.
        declared = [v for k, v in headers if k.lower() == "content-length"]
        headers = [h for h in headers if h[0].lower() != "content-length"]
        length = declared[0] if method == "HEAD" and declared else str(len(payload))
        headers.append(("X-Request-Id", request_id))
        headers.append(("Content-Length", length))
        start_response(_status_line(status), headers)
        self._log_request(method, route, status, started, request_id, environ)
        # Metrics are flushed by the Lambda handler in AWS; locally the request log carries the timing.
        self.metrics.clear_metrics()
        return [payload] if method != "HEAD" else []

    def _export_pages(self, event: dict[str, Any], first: bytes) -> Iterator[bytes]:
        """A whole export as one answer: the first page, then each next page the same route answers.

        A page that fails once the answer has begun raises: waitress then closes the
        connection without the chunked ending, and the client sees the export cut off.
        """
        head, _, rest = first.partition(b"\n")
        header = json.loads(head)
        cursor = header.get("next_cursor")
        yield json.dumps({**header, "next_cursor": None}, ensure_ascii=False).encode() + b"\n"
        yield rest
        while cursor:
            query = {**(event.get("queryStringParameters") or {}), "cursor": cursor}
            page = {
                **event,
                "queryStringParameters": query,
                "multiValueQueryStringParameters": {k: [v] for k, v in query.items()},
            }
            status, payload, _ = self._from_proxy(self.resolver().resolve(page, None))
            if status != 200:
                raise RuntimeError(f"export page answered {status}: {payload[:200]!r}")
            head, _, rest = payload.partition(b"\n")
            cursor = json.loads(head).get("next_cursor")
            yield rest

    @staticmethod
    def _log_request(
        method: str, route: str | None, status: int, started: float, request_id: str, environ: dict[str, Any]
    ) -> None:
        # The route as declared, never the path: a path holds keys and user ids, which the
        # caller chose and an erase must not leave behind in the log.
        logger.info(
            "http_request",
            extra={
                "event": "http_request",
                "method": method,
                "route": route,
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                "request_id": request_id,
                "remote_addr": environ.get("REMOTE_ADDR"),
            },
        )

    @staticmethod
    def _from_proxy(result: dict[str, Any]) -> tuple[int, bytes, list[tuple[str, str]]]:
        status = int(result.get("statusCode", 500))
        headers: list[tuple[str, str]] = []
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers.extend((name, str(v)) for v in values)
        for name, value in (result.get("headers") or {}).items():
            if not any(h[0].lower() == name.lower() for h in headers):
                headers.append((name, str(value)))
        raw = result.get("body") or ""
        payload = base64.b64decode(raw) if result.get("isBase64Encoded") else raw.encode("utf-8")
        return status, payload, headers

    def close(self) -> None:
        with self._apps_lock:
            for app in self._apps:
                close_app(app)
            self._apps.clear()
        self._close_persistence()


def make_server(service: MemoryService, settings: Settings, **listen: Unpack[Listen]) -> tuple[Any, WsgiApi]:
    """A waitress server (not running yet; connections bounded) and its WSGI app; ``port=0``: a free port.

    ``listen`` is ``guarded_server.Listen`` (host, port, threads, or ``sock``: a listening
    socket to accept on instead, as every ``memstack serve --workers`` process does).
    """
    from memstack.api.guarded_server import create_guarded_server  # waitress: not in the Lambda layer

    api = WsgiApi(service, settings)
    return create_guarded_server(api, server_limits(settings), **listen), api


def server_limits(settings: Settings) -> ServerLimits:
    from memstack.api.guarded_server import ServerLimits

    return ServerLimits(
        total=settings.server.server_connection_limit,
        per_client=settings.server.server_connections_per_client,
        idle_timeout=settings.server.server_idle_timeout_seconds,
        request_timeout=settings.server.server_request_timeout_seconds,
    )


@contextmanager
def running_in_thread(server: Any, name: str = "memstack-server") -> Iterator[str]:
    """Run ``server`` (from ``make_server``) on a daemon thread; yields its URL, stops it on exit."""
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://{server.effective_host}:{server.effective_port}"
    finally:
        stop_server(server, thread)


def stop_server(server: Any, thread: threading.Thread | None = None, timeout: float = 10.0) -> None:
    """Stop a server running in another thread.

    The worker threads are shut down first, while the loop still runs: a
    worker that finishes a response wakes the loop through the trigger pipe,
    and once the pipe is closed that write fails with EBADF (or, if the fd
    number was reused meanwhile, lands in someone else's file). Then the
    sockets are closed inside the server's own loop (closing them from here
    would pull them out from under its ``select``), and the loop ends.
    """
    from waitress import wasyncore

    server.task_dispatcher.shutdown(timeout=timeout)
    server.trigger.pull_trigger(lambda: wasyncore.close_all(server._map))
    if thread is not None:
        thread.join(timeout)
