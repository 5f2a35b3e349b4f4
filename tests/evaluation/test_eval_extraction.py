"""`memstack eval extraction`: scenarios through the ingest path, scored on the final LTM state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memstack.evaluation.scenarios import Expectations, check_state, load_scenarios
from memstack.models import MemoryRecord

BIN = Path(sys.executable).with_name("memstack")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "extraction"

MOVE = {
    "id": "move",
    "tags": ["update", "fact"],
    "user": "kim",
    "messages": [
        {
            "role": "user",
            "speaker": "Kim",
            "content": "I live in Tokyo.",
            "timestamp": "2024-01-05T09:00:00Z",
        },
        {
            "role": "user",
            "speaker": "Kim",
            "content": "I moved to Osaka.",
            "timestamp": "2024-02-05T09:00:00Z",
        },
    ],
    "expect": {"current": ["Osaka"], "absent": ["Tokyo"], "history": [["Tokyo", "Osaka"]]},
}
# Expects what no extractor should do: keep the old city current.
WRONG = {**MOVE, "id": "wrong", "tags": ["noise"], "expect": {"current": ["Tokyo"]}}


def run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(MEMSTACK_DATA_DIR=str(tmp_path / "data"), MEMSTACK_EMBEDDER="hashing")
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


def write(tmp_path: Path, *scenarios: dict[str, object]) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in scenarios))
    return path


def test_json_report_scores_each_scenario_and_each_tag(tmp_path: Path) -> None:
    proc = run(["eval", "extraction", str(write(tmp_path, MOVE, WRONG)), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert (report["scenarios"], report["passed"], report["pass_rate"]) == (2, 1, 0.5)
    assert report["by_tag"]["update"] == {"n": 1, "passed": 1, "rate": 1.0}
    assert report["by_tag"]["noise"]["rate"] == 0.0
    assert report["by_file"]["s.jsonl"]["n"] == 2
    assert report["llm"] == "local" and report["llm_calls_per_message"] == 0.0
    # Two versions of the home memory per scenario, over two messages each.
    assert report["ltm_per_message"] == 1.0
    [wrong] = [r for r in report["results"] if not r["passed"]]
    assert wrong["checks"][0]["kind"] == "current" and "Osaka" in wrong["checks"][0]["detail"]
    assert not (tmp_path / "data").exists()  # every scenario ran in a temporary store


def test_table_lists_failures(tmp_path: Path) -> None:
    proc = run(["eval", "extraction", str(write(tmp_path, MOVE, WRONG))], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1/2 passed" in proc.stdout.replace("\n", " ")
    assert "FAIL wrong" in proc.stdout


def test_a_bad_scenario_file_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(MOVE) + "\n" + json.dumps({**MOVE, "expect": {"curent": []}}) + "\n")
    proc = run(["eval", "extraction", str(path)], tmp_path)
    assert proc.returncode == 2
    assert "bad.jsonl:2" in proc.stderr and "curent" in proc.stderr


def test_the_shipped_sets_load_and_cover_every_tag() -> None:
    scenarios = load_scenarios(sorted(EXAMPLES.glob("*.jsonl")))
    dev = [s for s in scenarios if s.source == "dev.jsonl"]
    assert len(dev) >= 80
    tags = {t for s in dev for t in s.tags}
    assert tags >= {
        "add",
        "update",
        "delete",
        "preference",
        "event",
        "fact",
        "noise",
        "correction",
        "multi-turn",
    }


def test_history_needs_the_old_value_before_the_new_in_one_chain() -> None:
    def rec(rid: str, content: str, replaces: str | None = None, current: bool = True) -> MemoryRecord:
        return MemoryRecord(
            id=rid, tenant="t", user_id="u", content=content, replaces_id=replaces, is_current=current
        )

    chain = [rec("a", "Kim lives in Tokyo.", current=False), rec("b", "Kim lives in Osaka.", "a")]
    ok = check_state(Expectations(history=[("Tokyo", "Osaka")]), chain, {})
    backwards = check_state(Expectations(history=[("Osaka", "Tokyo")]), chain, {})
    apart = check_state(
        Expectations(history=[("Tokyo", "Osaka")]),
        [rec("a", "Kim lives in Tokyo."), rec("c", "Kim likes Osaka.")],
        {},
    )
    assert [c.passed for c in ok + backwards + apart] == [True, False, False]
    absent = check_state(Expectations(absent=["Tokyo"], current=["Osaka"]), chain, {})
    assert all(c.passed for c in absent)  # a superseded version may say the old value


def test_dated_needs_a_current_memory_with_the_phrase_on_that_day() -> None:
    from datetime import UTC, date, datetime

    def rec(rid: str, content: str, when: datetime | None, current: bool = True) -> MemoryRecord:
        return MemoryRecord(
            id=rid, tenant="t", user_id="u", content=content, event_time=when, is_current=current
        )

    april = datetime(2024, 4, 5, 23, 30, tzinfo=UTC)
    memories = [
        rec("a", "Ada is in Lisbon from April 5.", april),
        rec("b", "Ada lives in Porto.", None),
        rec("c", "Ada was in Faro.", april, current=False),
    ]
    expect = Expectations(
        dated=[
            ("Lisbon", date(2024, 4, 5)),
            ("Lisbon", date(2024, 4, 6)),
            ("Porto", date(2024, 4, 5)),
            ("Faro", date(2024, 4, 5)),
        ]
    )
    checks = check_state(expect, memories, {})
    assert [c.passed for c in checks] == [True, False, False, False]
    assert "no event_time" in checks[2].detail
