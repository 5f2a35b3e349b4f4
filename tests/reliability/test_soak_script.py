"""``memstack bench soak`` runs end to end (short smokes; the real soak is run by hand, see the README).

The smokes ask for a number of operations per client as well as seconds: on a loaded machine two
seconds may hold only a handful of requests, and what is asserted is what those requests did."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memstack.bench import soak
from memstack.cli.app import app
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]


def test_a_short_soak_holds_every_invariant(tmp_path: Path) -> None:
    result = soak.run(
        clients=2, seconds=1.0, data_dir=tmp_path / "data", embedder="hashing", seed=3, min_operations=40
    )
    assert result["operations"] > 0 and result["errors"] == 0
    assert set(result["invariants"]) >= {"erased messages gone from every store", "version chains linear"}
    broken = {name: r["violations"] for name, r in result["invariants"].items() if not r["held"]}
    assert broken == {}
    assert {"add", "search", "health"} <= set(result["per_operation"])


def test_bench_soak_prints_the_summary_as_json(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        app,
        [
            "bench",
            "soak",
            "--clients",
            "1",
            "--seconds",
            "1",
            "--min-operations",
            "5",
            "--data-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.stdout)
    assert report["operations"] > 0 and all(v["held"] for v in report["invariants"].values())


def test_the_script_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "soak.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "--clients" in done.stdout and "--seconds" in done.stdout
