"""``memstack serve`` in a child process on loopback, for the HTTP benchmarks.

The server runs as a user runs it (its own process, its own GIL), so the
load generator's threads in this process never compete with it for the
interpreter. It listens on 127.0.0.1 only, on a port the OS picks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from http.client import HTTPConnection
from pathlib import Path

#: the API key the benchmarks use and the tenant it maps to (``fixture.TENANT``)
API_KEY = "bench-key"
_ADDRESS = re.compile(r"http://127\.0\.0\.1:(\d+)")


class ServerProcess:
    def __init__(
        self,
        data_dir: Path,
        *,
        embedder: str = "hashing",
        threads: int = 8,
        workers: int = 1,
        tenant: str = "bench",
        python: str = sys.executable,
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.env = dict(env or {})
        self.embedder = embedder
        self.threads = threads
        self.workers = workers
        self.tenant = tenant
        self.python = python  # another venv's interpreter: scripts/check_install.py
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None
        self._output: list[str] = []

    def __enter__(self) -> ServerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
        env.update(
            MEMSTACK_DATA_DIR=str(self.data_dir),
            MEMSTACK_EMBEDDER=self.embedder,
            MEMSTACK_API_KEYS=f"{API_KEY}={self.tenant}",
            POWERTOOLS_LOG_LEVEL="WARNING",
        )
        env.update(self.env)
        self._proc = subprocess.Popen(
            [
                *(self.python, "-m", "memstack", "serve", "--host", "127.0.0.1", "--port", "0"),
                *("--threads", str(self.threads), "--workers", str(self.workers)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.port = self._read_port(deadline=time.monotonic() + 120)
        self._wait_healthy(deadline=time.monotonic() + 60)
        return self

    def _read_port(self, deadline: float) -> int:
        assert self._proc is not None and self._proc.stdout is not None
        found: list[int] = []

        def read() -> None:
            assert self._proc is not None and self._proc.stdout is not None
            for line in self._proc.stdout:
                self._output.append(line)
                if not found and (m := _ADDRESS.search(line)):
                    found.append(int(m.group(1)))

        threading.Thread(target=read, daemon=True).start()  # keeps draining the pipe afterwards
        while not found:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("memstack serve did not start: " + "".join(self._output[-20:]))
            time.sleep(0.05)
        return found[0]

    def _wait_healthy(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            try:
                conn = HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/v1/health")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("memstack serve never answered /v1/health")

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=30)


def post(conn: HTTPConnection, path: str, body: dict[str, object]) -> int:
    """One JSON POST with the benchmark key on a kept-alive connection; returns the status."""
    conn.request(
        "POST",
        path,
        body=json.dumps(body),
        headers={"Content-Type": "application/json", "X-Api-Key": API_KEY},
    )
    response = conn.getresponse()
    response.read()
    return response.status
