"""``memstack serve`` stops on SIGTERM and SIGINT and says so, with one process or several (issue 26).

``--workers 2`` ignored both when SIGINT was already ignored in the parent (a shell's
background job, ``nohup``): the parent forwarded SIGINT, which the worker processes
inherited as ignored. A single process ended on SIGTERM at once, without a word.
Each server here is started as a background job is: SIGINT ignored before ``exec``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests

from tests.waiting import wait_until

WAIT = 90  # seconds: generous on a loaded machine; a server that ignores the signal fails here

# SIGINT ignored, then exec: what a non-interactive shell does for ``memstack serve &``.
AS_BACKGROUND_JOB = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.executable, [sys.executable, '-m', 'memstack', *sys.argv[1:]])"
)


class Served:
    def __init__(self, tmp_path: Path, workers: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
        env.update(MEMSTACK_DATA_DIR=str(tmp_path / "data"), MEMSTACK_EMBEDDER="hashing", COLUMNS="200")
        args = ["serve", "--host", "127.0.0.1", "--port", "0", "--threads", "2", "--workers", str(workers)]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", AS_BACKGROUND_JOB, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,  # a group of its own: a server that ignores the signal is killed whole
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        wait_until(lambda: self.base is not None or self.proc.poll() is not None, deadline=WAIT)
        assert self.base, "".join(self.lines)
        wait_until(self._healthy, deadline=WAIT)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def base(self) -> str | None:
        found = [m.group(1) for line in self.lines if (m := re.search(r"API on (http://[\d.]+:\d+)", line))]
        return found[0] if found else None

    def _healthy(self) -> bool:
        try:
            return requests.get(f"{self.base}/v1/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def stop(self, sig: signal.Signals) -> tuple[int | None, str]:
        """Send ``sig`` to the server (the parent, when there are several processes); rc and output."""
        self.proc.send_signal(sig)
        try:
            rc: int | None = self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            rc = None
            os.killpg(self.proc.pid, signal.SIGKILL)  # the parent and its worker processes
            self.proc.wait(timeout=30)
        return rc, "".join(self.lines)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("workers", [1, 2])
def test_serve_stops_on_the_signal_and_says_so(tmp_path: Path, workers: int, sig: signal.Signals) -> None:
    served = Served(tmp_path, workers)
    base = served.base
    rc, output = served.stop(sig)
    assert rc == 0, output
    assert f"{sig.name} received: stopping" in output and output.rstrip().endswith("stopped"), output
    # Every process is gone: nothing answers on the port any more.
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{base}/v1/health", timeout=5)
