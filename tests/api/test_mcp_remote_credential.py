"""``memstack mcp --url … --api-key WRONG`` started, then failed every tool call: it checks the key first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent / "memstack"


def _mcp(url: str, key: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    return subprocess.run(
        [str(BIN), "mcp", "--url", url, "--api-key", key],
        input="",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_wrong_key_stops_the_mcp_server_before_it_serves(live_server: str) -> None:
    out = _mcp(live_server, "WRONG")
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert "refused the credential" in out.stderr and "--api-key" in out.stderr
    assert out.stdout == ""  # nothing was served on stdout (the MCP channel)


def test_the_right_key_serves_until_stdin_closes(live_server: str) -> None:
    out = _mcp(live_server, "acme-key")
    assert out.returncode == 0, out.stderr
