"""``scripts/soak.py`` runs end to end (a 2-second smoke; the real soak is run by hand, see the README)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "soak.py"


def test_a_short_soak_holds_every_invariant(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("memstack_soak_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    soak = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = soak  # dataclasses look their module up by name
    spec.loader.exec_module(soak)
    result = soak.run(clients=2, seconds=2.0, data_dir=tmp_path / "data", embedder="hashing", seed=3)
    assert result["operations"] > 0 and result["errors"] == 0
    assert set(result["invariants"]) >= {"erased messages gone from every store", "version chains linear"}
    broken = {name: r["violations"] for name, r in result["invariants"].items() if not r["held"]}
    assert broken == {}
    assert {"add", "search", "health"} <= set(result["per_operation"])
