"""Switching MEMSTACK_EMBEDDER on a store: a clear refusal, then ``memstack reembed`` (issue 26).

It was a raw ``ValueError: matmul … 768 … 384`` traceback (mpnet over a MiniLM
store), or silently wrong results (the hashing embedder, also 384 dimensions).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.e2e.test_cli import BIN


def run(args: list[str], data_dir: Path, dim: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(MEMSTACK_DATA_DIR=str(data_dir), MEMSTACK_EMBEDDER="hashing", MEMSTACK_EMBEDDING_DIM=str(dim))
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_a_store_refuses_another_embedder_until_reembed_switches_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    messages = tmp_path / "conv.jsonl"
    messages.write_text(
        json.dumps({"id": "a1", "speaker": "Sam", "content": "I just moved to Lisbon"}) + "\n"
    )
    assert run(["ingest", str(messages), "--user", "sam"], data, dim=384).returncode == 0

    refused = run(["search", "where does Sam live", "--user", "sam"], data, dim=256)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "error (embedder_mismatch)" in refused.stderr
    assert "'hashing-384'" in refused.stderr and "'hashing-256'" in refused.stderr
    assert "memstack reembed" in refused.stderr

    done = run(["reembed", "--json"], data, dim=256)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["users"] == 1 and report["reembedded"] == report["records"] > 0

    found = run(["search", "where does Sam live", "--user", "sam", "--json"], data, dim=256)
    assert found.returncode == 0, found.stderr
    assert any("Lisbon" in hit["content"] for hit in json.loads(found.stdout)["results"])
    # And now the old embedder is the one refused.
    assert "error (embedder_mismatch)" in run(["search", "x", "--user", "sam"], data, dim=384).stderr
