"""``memstack serve`` as a user runs it: a process, a port, curl-style HTTP, Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests


def test_memstack_serve_answers_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")},
        "MEMSTACK_DATA_DIR": str(tmp_path / "data"),
        "MEMSTACK_EMBEDDER": "hashing",
        "COLUMNS": "200",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "memstack", "serve", "--port", "0", "--threads", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        base = None
        while base is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            match = re.search(r"memstack API on (http://[\d.]+:\d+)", line)
            base = match.group(1) if match else None
        assert base, "the server did not announce its address"
        assert requests.get(f"{base}/v1/health", timeout=10).json()["status"] == "ok"
        added = requests.post(
            f"{base}/v1/memories",
            headers={"Authorization": "Bearer dev-key"},
            timeout=10,
            json={"user_id": "alice", "messages": [{"role": "user", "content": "I play chess on Sundays."}]},
        )
        assert added.status_code == 202
        found = requests.post(
            f"{base}/v1/memories/search",
            headers={"X-Api-Key": "dev-key"},
            timeout=10,
            json={"user_id": "alice", "query": "chess"},
        ).json()
        assert "I play chess on Sundays." in [r["content"] for r in found["results"]]
        assert requests.get(f"{base}/v1/memories", params={"user_id": "alice"}, timeout=10).status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
    assert proc.returncode == 0, output
    # One structured line per request, and no second, formatted one: the MCP SDK's root handler
    # printed every request again ("[…] INFO http_request local_server.py:…").
    assert output.count('"event":"http_request"') >= 4
    assert [
        line
        for line in output.splitlines()
        if "http_request" in line and '"event":"http_request"' not in line
    ] == []


def test_memstack_serve_with_worker_processes_answers_and_stops_on_sigterm(tmp_path: Path) -> None:
    from memstack.bench.server_process import ServerProcess, post

    with ServerProcess(tmp_path / "data", workers=2, threads=2, tenant="bench") as server:
        from http.client import HTTPConnection

        conn = HTTPConnection("127.0.0.1", server.port, timeout=30)
        added = {
            "user_id": "alice",
            "infer": False,
            "messages": [{"role": "user", "content": "I play chess on Sundays."}],
        }
        assert post(conn, "/v1/memories", added) in (200, 201, 202)
        # Every process sees the file: whichever accepts, the memory is there.
        for _ in range(6):
            c = HTTPConnection("127.0.0.1", server.port, timeout=30)
            c.request(
                "POST",
                "/v1/memories/search",
                body='{"user_id": "alice", "query": "chess"}',
                headers={"X-Api-Key": "bench-key", "Content-Type": "application/json"},
            )
            response = c.getresponse()
            body = response.read()
            # On failure, the processes' own log says why (a 500 logs its traceback there).
            log = "".join(server._output[-60:])
            assert response.status == 200 and b"chess on Sundays" in body, (response.status, body, log)
            c.close()
        proc = server._proc
    assert proc is not None and proc.returncode == 0
