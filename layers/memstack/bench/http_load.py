"""Closed-loop HTTP load: C clients, each sending its next request when the last one answers.

Bounded in time (``seconds``) and aimed at one loopback server only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import HTTPConnection
from typing import Any

from memstack.bench.server_process import post

Body = Callable[[int, int], dict[str, Any]]  # (client, request number) -> JSON body


@dataclass
class LoadResult:
    clients: int
    seconds: float
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    #: the first few error answers or exceptions, to say what went wrong
    error_samples: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.latencies_ms) + self.errors


def run_load(port: int, path: str, body: Body, *, clients: int, seconds: float) -> LoadResult:
    result = LoadResult(clients=clients, seconds=seconds)
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    deadline = [0.0]

    def client(index: int) -> None:
        conn = HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        n = 0
        while time.monotonic() < deadline[0]:
            began = time.perf_counter()
            try:
                status = post(conn, path, body(index, n))
                error = None if status == 200 else f"HTTP {status}"
            except (OSError, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                conn.close()
                conn = HTTPConnection("127.0.0.1", port, timeout=60)
            elapsed = (time.perf_counter() - began) * 1000
            with lock:
                if error is None:
                    result.latencies_ms.append(elapsed)
                else:
                    result.errors += 1
                    if len(result.error_samples) < 5:
                        result.error_samples.append(error)
            n += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    deadline[0] = time.monotonic() + seconds
    began = time.monotonic()
    start.wait()
    for t in threads:
        t.join(timeout=seconds + 120)
    result.seconds = round(time.monotonic() - began, 3)
    return result
