"""``memstack consolidate`` and ``memstack dlq``: once in a subprocess, as a user runs it, then in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memstack.cli import app
from memstack.factory import build_service
from memstack.models import Message
from memstack.settings import load_settings
from typer.testing import CliRunner

BIN = Path(sys.executable).with_name("memstack")
TURNS = [
    "I just moved to Lisbon for a new job",
    "I work as a data engineer in Lisbon now",
    "My colleagues at work are friendly",
]


def _env(data_dir: Path) -> dict[str, str]:
    return {
        "MEMSTACK_DATA_DIR": str(data_dir),
        "MEMSTACK_EMBEDDER": "hashing",
        "MEMSTACK_CONSOLIDATION_THRESHOLD": "2",
    }


def test_consolidate_reports_what_it_read_and_wrote_and_dlq_lists(tmp_path: Path) -> None:
    svc = build_service(load_settings(data_dir=tmp_path, embedder="hashing"))
    for user in ("sam", "kim"):
        svc.add(
            "local",
            user,
            [Message(id=f"{user}{i}", content=t, speaker="Sam") for i, t in enumerate(TURNS)],
            infer=False,
        )
    svc.close()

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")} | _env(tmp_path)
    first = subprocess.run(
        [str(BIN), "consolidate", "--user", "sam", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["user_id"] == "sam" and report["status"] == "done"
    assert report["read"] == 3 and report["marked"] == 3 and report["written"] >= 1
    assert len(report["memory_ids"]) == report["written"] + report["updated"]

    runner = CliRunner()
    again = runner.invoke(app, ["consolidate", "--user", "sam", "--json"], env=_env(tmp_path))
    assert again.exit_code == 0 and json.loads(again.stdout)["status"] == "nothing_to_do"
    # Without --user: the scheduler pass picks kim (3 pending >= threshold 2) and runs the job here.
    everyone = runner.invoke(app, ["consolidate", "--json"], env=_env(tmp_path))
    assert everyone.exit_code == 0, everyone.output
    assert [(u["user_id"], u["pending_after"]) for u in json.loads(everyone.stdout)["users"]] == [("kim", 0)]
    dead = runner.invoke(app, ["dlq", "list", "--json"], env=_env(tmp_path))
    assert dead.exit_code == 0 and json.loads(dead.stdout) == {"dead_letters": []}
    redriven = runner.invoke(app, ["dlq", "redrive", "--json"], env=_env(tmp_path))
    assert redriven.exit_code == 0 and json.loads(redriven.stdout) == {"redriven": 0}
