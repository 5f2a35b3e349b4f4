"""The migration examples of docs/api.md run, as written, against a live local server."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("script", ["from_mem0.py", "from_agentcore.py"])
def test_example_runs(script: str, live_server: str) -> None:
    env = {**os.environ, "MEMSTACK_URL": live_server, "MEMSTACK_API_KEY": "acme-key"}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_the_docs_never_reuse_an_idempotency_key() -> None:
    """docs/api.md's curl and Python blocks sent one key with different bodies: the second was 422."""
    docs = (EXAMPLES.parent / "docs" / "api.md").read_text()
    keys = re.findall(r"Idempotency-Key: (\w+)|idempotency_key=\"(\w+)\"", docs)
    used = [a or b for a, b in keys]
    assert used and len(used) == len(set(used)), used
