"""A real HTTP receiver for webhook tests: a server on a free loopback port that records every request."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    deliveries: list[Delivery] = field(default_factory=list)
    #: status codes to answer, in order; once used up, every answer is ``then``
    answers: list[int] = field(default_factory=list)
    then: int = 200
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self) -> int:
        with self.lock:
            return self.answers.pop(0) if self.answers else self.then

    def count(self) -> int:
        with self.lock:
            return len(self.deliveries)


@contextmanager
def receiving(path: str = "/hook") -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 (port 0: a free one) until the block ends."""
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status = receiver.answer()
            with receiver.lock:
                receiver.deliveries.append(Delivery(self.path, dict(self.headers.items()), body))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}{path}")
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
