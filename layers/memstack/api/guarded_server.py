"""waitress, held against clients that open connections and send nothing (or send it slowly).

With waitress's defaults about 98 idle TCP connections took the whole server
offline for 120 s: it stops accepting at ``connection_limit`` (100) and closes
an idle connection only after ``channel_timeout`` (120 s), checked every
``cleanup_interval`` (30 s); a client sending its headers a byte at a time
was never idle at all. Here (``ServerLimits``, from ``Settings``):

* one client address may hold at most ``per_client`` connections; another
  one is closed as soon as it is accepted;
* at ``total`` connections, a new connection evicts the connection that has
  been quiet longest among those not being served, instead of the server
  refusing everyone (so ``/v1/health`` and real clients still get in);
* a connection with nothing in flight is closed after ``idle_timeout``
  seconds, and a request must arrive whole (headers and body) within
  ``request_timeout`` seconds of its first byte, checked every second.

Behind a reverse proxy every client has the proxy's address: raise
``per_client`` to the proxy's connection pool (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from aws_lambda_powertools import Logger
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ErrorTask

from memstack.api.errors import error_body

logger = Logger(service="memstack-api", child=True)


@dataclass(frozen=True)
class ServerLimits:
    total: int = 200
    per_client: int = 20
    idle_timeout: float = 10.0
    request_timeout: float = 30.0


class Listen(TypedDict, total=False):
    """Where and how a server listens: the one parameter list of ``create_guarded_server`` and
    ``wsgi_server.make_server`` (which passes it through)."""

    host: str  # default 127.0.0.1
    port: int  # default 8000; 0 picks a free port
    threads: int  # default 8
    sock: socket.socket | None  # a listening socket to accept on instead of binding host:port


#: waitress's own refusals (HTTP it cannot parse), by status: the machine-readable code
_PARSE_ERRORS = {
    400: "bad_request",
    413: "body_too_large",
    431: "headers_too_large",
    501: "not_implemented",
}


class JsonErrorTask(ErrorTask):
    """waitress's answer to a request it cannot parse (a bad header, a bad Content-Length, a
    bare LF), in the API's one error shape instead of waitress's plain text."""

    def execute(self) -> None:
        e = self.request.error
        body = error_body(_PARSE_ERRORS.get(e.code, "internal_error"), f"{e.reason}: {e.body}").encode()
        self.status = f"{e.code} {e.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class GuardedChannel(HTTPChannel):
    """An HTTP connection that remembers when the request it is reading began."""

    error_task_class = JsonErrorTask
    request_started: float | None = None

    def received(self, data: bytes) -> bool:
        before = self.request
        result = bool(super().received(data))
        if self.request is not None and self.request is not before:
            self.request_started = time.monotonic()  # the first bytes of a new request
        elif self.request is None:
            self.request_started = None
        return result


class GuardedServer(TcpWSGIServer):
    channel_class = GuardedChannel

    def __init__(self, application: Any, limits: ServerLimits, **kw: Any) -> None:
        self.limits = limits
        super().__init__(application, **kw)

    def _channels(self) -> list[GuardedChannel]:
        return list(self.active_channels.values())

    def handle_accept(self) -> None:
        try:
            accepted = self.accept()
        except OSError:
            return
        if accepted is None:
            return
        conn, addr = accepted
        client = addr[0] if isinstance(addr, tuple) else str(addr)
        channels = self._channels()
        if sum(1 for c in channels if _client(c) == client) >= self.limits.per_client:
            logger.warning("connection refused: too many from one client", extra={"limit": "per_client"})
            _close(conn)
            return
        if len(channels) >= self.limits.total and not self._evict_quietest(channels):
            logger.warning("connection refused: every connection is busy", extra={"limit": "total"})
            _close(conn)
            return
        try:
            self.set_socket_options(conn)
        except OSError:
            _close(conn)
            return
        self.channel_class(self, conn, self.fix_addr(addr), self.adj, map=self._map)

    def _evict_quietest(self, channels: list[GuardedChannel]) -> bool:
        waiting = [c for c in channels if not c.requests]
        if not waiting:
            return False
        min(waiting, key=lambda c: c.last_activity).handle_close()
        return True

    def maintenance(self, now: float) -> None:
        """Close idle connections and requests arriving too slowly (``now`` is wall-clock time)."""
        idle_cutoff = now - self.limits.idle_timeout
        slow_cutoff = time.monotonic() - self.limits.request_timeout
        for channel in self._channels():
            if channel.requests:
                continue  # being served: the response decides when it ends
            started = channel.request_started
            if channel.last_activity < idle_cutoff or (started is not None and started < slow_cutoff):
                channel.will_close = True


def _client(channel: HTTPChannel) -> str:
    addr = channel.addr
    return addr[0] if isinstance(addr, tuple) else str(addr)


def _close(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.close()


def create_guarded_server(application: Any, limits: ServerLimits, **listen: Unpack[Listen]) -> GuardedServer:
    """A ``GuardedServer`` on ``host:port`` (or accepting on the listening ``sock``), not yet running."""
    adj = Adjustments(
        host=listen.get("host", "127.0.0.1"),
        port=listen.get("port", 8000),
        threads=listen.get("threads", 8),
        ident="memstack",
        # The limits above are enforced here; waitress's own must never be what stops accepting.
        connection_limit=limits.total + 16,
        channel_timeout=max(1, int(limits.idle_timeout)),
        cleanup_interval=1,
    )
    map_: dict[int, Any] = {}
    sock = listen.get("sock")
    if sock is None:
        return GuardedServer(application, limits, map=map_, adj=adj, sockinfo=adj.listen[0])
    info = (sock.family, sock.type, sock.proto, sock.getsockname())
    return GuardedServer(application, limits, map=map_, _sock=sock, adj=adj, bind_socket=False, sockinfo=info)
