"""``memstack bench ingest|server|coldstart`` run end to end with tiny sizes (figures never asserted)."""

from __future__ import annotations

import json
from pathlib import Path

from memstack.cli import app
from typer.testing import CliRunner


def _json(output: str) -> dict:
    return json.loads(output[output.index("{") :])


def test_bench_ingest_measures_every_cell() -> None:
    args = ["bench", "ingest", "--existing", "20", "--messages", "4", "--inline-messages", "2", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    cells = _json(result.stdout)["cells"]
    assert {(c["path"], c["batch"], c["infer"]) for c in cells} == {
        (path, batch, infer)
        for path in ("service", "http")
        for batch in (1, 50)
        for infer in ("off", "queued", "inline")
    }
    assert all(c["msg_per_s"] > 0 for c in cells)
    assert all(c["extraction_jobs_per_s"] for c in cells if c["infer"] == "queued")


def test_bench_server_loads_a_loopback_server_and_counts_errors() -> None:
    args = [
        "bench",
        "server",
        "--memories",
        "20",
        "--clients",
        "1,2",
        "--seconds",
        "1",
        "--threads",
        "2",
        "--json",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    points = _json(result.stdout)["points"]
    assert [p["clients"] for p in points] == [1, 2]
    assert all(p["requests"] > 0 and p["errors"] == 0 for p in points), points


def test_bench_coldstart_imports_a_handler_both_ways() -> None:
    result = CliRunner().invoke(
        app, ["bench", "coldstart", "--handler", "cost_report", "--repeats", "1", "--source", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = _json(result.stdout)
    (handler,) = report["handlers"]
    assert handler["function"] == "cost_report"
    assert handler["compiled_ms"]["median"] > 0 and handler["source_ms"]["median"] > 0
    assert "built" in report["layer"]
    # The floor is measured in the same run, once per compiled import, and each handler is read against it.
    assert report["floor_ms"]["median"] > 0 and handler["compiled_over_floor"] > 0
    # CPU time beside wall time: what the import costs an idle core, whatever the load.
    assert handler["compiled_cpu_ms"]["median"] > 0 and report["floor_cpu_ms"]["median"] > 0


def test_bench_coldstart_prints_its_table_with_the_floor() -> None:
    result = CliRunner().invoke(
        app, ["bench", "coldstart", "--handler", "schema_migration", "--repeats", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "schema_migration" in result.stdout and "compiled / floor" in result.stdout
    assert "floor: a fresh interpreter importing boto3" in result.stdout and "load average" in result.stdout


def test_bench_coldstart_names_an_unknown_handler() -> None:
    result = CliRunner().invoke(app, ["bench", "coldstart", "--handler", "nope"])
    assert result.exit_code != 0 and "no such handler: nope" in str(result.exception)


def test_bench_extraction_reports_turns_per_second_beside_the_floor() -> None:
    fixture = Path(__file__).parent.parent / "fixtures" / "locomo-tiny.json"
    args = ["bench", "extraction", "--turns", "8", "--data", str(fixture), "--embedder", "hashing"]
    result = CliRunner().invoke(app, [*args, "--compare", "--json"])
    assert result.exit_code == 0, result.output
    report = _json(result.stdout)
    assert report["turns"] == 8 and report["floor_turns_per_s"] > 0 and report["warmup_seconds"] > 0
    assert [r["memo"] for r in report["runs"]] == [True, False]
    for run in report["runs"]:
        assert run["turns_per_s"] > 0 and run["ltm_memories"] > 0 and run["of_floor"] > 0
        # Each turn is embedded at ingest; the extraction adds its memories' texts.
        assert run["texts_per_turn"] >= 1 and 0 < run["embed_share"] <= 1
        assert run["cpu_seconds"] > 0 and run["turns_per_cpu_s"] > 0 and run["floor_turns_per_cpu_s"] > 0
    table = CliRunner().invoke(app, ["bench", "extraction", "--turns", "4", "--embedder", "hashing"])
    assert table.exit_code == 0, table.output
    assert "turns/s" in table.stdout and "floor" in table.stdout and "load average" in table.stdout
    assert "turns/CPU s" in table.stdout


def test_bench_coldstart_writes_the_bytecode_it_times_with() -> None:
    from memstack.bench.coldstart import compiled_environment

    shell = {"PATH": "/usr/bin", "PYTHONDONTWRITEBYTECODE": "1", "MEMSTACK_STORE_BACKEND": "embedded"}
    # A shell that never writes bytecode would time the compile of every module changed since.
    assert compiled_environment(shell) == {"PATH": "/usr/bin"}
