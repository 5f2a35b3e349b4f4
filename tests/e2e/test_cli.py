"""The `memstack` command in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).with_name("memstack")


def run(args: list[str], data_dir: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(MEMSTACK_DATA_DIR=str(data_dir), MEMSTACK_EMBEDDER="hashing")
    return subprocess.run(
        [str(BIN), *args], input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False
    )


@pytest.fixture
def conversation(tmp_path: Path) -> Path:
    path = tmp_path / "conv.jsonl"
    lines = [
        {
            "id": "a1",
            "speaker": "Sam",
            "content": "I just moved to Lisbon for a new job",
            "timestamp": "2026-02-01T10:00:00Z",
        },
        {"id": "a2", "speaker": "Sam", "content": "My cat Pixel hates the new apartment"},
        {"id": "a3", "role": "assistant", "content": "Sorry to hear about Pixel!"},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def test_ingest_then_search_then_list(tmp_path: Path, conversation: Path) -> None:
    data = tmp_path / "store"
    out = run(["ingest", str(conversation), "--user", "sam", "--json"], data)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["stored"] == 3
    out = run(["search", "which city did Sam move to", "--user", "sam", "--k", "2", "--json"], data)
    assert out.returncode == 0, out.stderr
    results = json.loads(out.stdout)["results"]
    assert results[0]["source_ids"] == ["a1"] and "Lisbon" in results[0]["content"]
    # The API's shape: agent_id is there, the internal op_key is not.
    assert all("agent_id" in r and "op_key" not in r["metadata"] for r in results)
    out = run(["search", "Pixel", "--user", "sam"], data)
    assert out.returncode == 0 and "Pixel" in out.stdout
    out = run(["memories", "--user", "sam", "--json"], data)
    assert out.returncode == 0
    listed = json.loads(out.stdout)["memories"]
    assert {m["source_ids"][0] for m in listed} == {"a1", "a2", "a3"}
    assert all("agent_id" in m and "op_key" not in m["metadata"] for m in listed)
    # another user sees nothing
    out = run(["search", "Lisbon", "--user", "someone-else", "--json"], data)
    assert json.loads(out.stdout)["results"] == []


def test_ingest_from_stdin(tmp_path: Path) -> None:
    out = run(["ingest", "-", "--user", "u", "--json"], tmp_path, stdin='{"content": "hello there"}\n')
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["accepted"] == 1


@pytest.mark.parametrize(
    ("args", "stdin", "fragment"),
    [
        (["ingest", "missing.jsonl", "--user", "u"], None, "no such file"),
        (["ingest", "-", "--user", "u"], "{not json\n", "<stdin>:1: not valid JSON"),
        (["ingest", "-", "--user", "u"], '{"speaker": "x"}\n', "<stdin>:1: content"),
        (["ingest", "-", "--user", "u"], '{"content": "hi", "colour": "red"}\n', "colour"),
        (["search", "x", "--user", "u", "--k", "0"], None, "--top-k must be between"),
        (["search", "  ", "--user", "u"], None, "the query is empty"),
        (["search", "x"], None, "--user"),
    ],
)
def test_user_mistakes_are_one_clear_line(
    tmp_path: Path, args: list[str], stdin: str | None, fragment: str
) -> None:
    out = run(args, tmp_path, stdin=stdin)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert fragment in out.stderr


def test_bad_setting_is_a_clear_error(tmp_path: Path) -> None:
    env_run = subprocess.run(
        [str(BIN), "memories", "--user", "u"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "MEMSTACK_DATA_DIR": str(tmp_path), "MEMSTACK_RRF_K": "-3"},
    )
    assert env_run.returncode != 0 and "Traceback" not in env_run.stderr
    assert "MEMSTACK_RRF_K" in env_run.stderr


def test_naive_timestamps_are_read_in_the_configured_timezone(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(MEMSTACK_DATA_DIR=str(tmp_path), MEMSTACK_EMBEDDER="hashing", MEMSTACK_TIMEZONE="Asia/Tokyo")
    line = '{"id": "t1", "content": "lunch at noon", "timestamp": "2026-03-01 12:00"}\n'
    for args, stdin in (
        (["ingest", "-", "--user", "u", "--no-infer"], line),
        (["memories", "--user", "u", "--json"], None),
    ):
        out = subprocess.run(
            [str(BIN), *args], input=stdin, capture_output=True, text=True, env=env, timeout=120, check=False
        )
        assert out.returncode == 0, out.stderr
    (memory,) = json.loads(out.stdout)["memories"]
    assert memory["event_time"] == "2026-03-01T03:00:00Z"  # 12:00 in Tokyo is 03:00 UTC


def test_memories_by_event_time_lists_the_newest_event_first(tmp_path: Path) -> None:
    path = tmp_path / "said.jsonl"
    said = [
        ("feb", "2026-02-01T10:00:00Z"),
        ("long ago", "2020-01-01T10:00:00Z"),
        ("last year", "2025-01-01T10:00:00Z"),
    ]
    path.write_text(
        "".join(json.dumps({"id": i, "content": f"it was {i}", "timestamp": t}) + "\n" for i, t in said)
    )
    data = tmp_path / "store"
    assert run(["ingest", str(path), "--user", "sam"], data).returncode == 0

    def ids(*more: str) -> list[str]:
        out = run(["memories", "--user", "sam", "--json", *more], data)
        assert out.returncode == 0, out.stderr
        return [m["source_ids"][0] for m in json.loads(out.stdout)["memories"]]

    assert ids("--order", "event_time") == ["feb", "last year", "long ago"]
    assert ids() == ["last year", "long ago", "feb"]  # newest written first
    bad = run(["memories", "--user", "sam", "--order", "oldest"], data)
    assert bad.returncode == 2 and "oldest" in bad.stderr


def test_export_of_a_user_with_no_data_says_where_it_looked(tmp_path: Path, conversation: Path) -> None:
    """It wrote 0 records with exit 0, and created an empty .memstack/ where it was run."""
    nowhere = tmp_path / "elsewhere" / ".memstack"
    out = run(["export", "--user", "maya", "--out", str(tmp_path / "x.jsonl")], nowhere)
    assert out.returncode == 2 and "no memstack store in the data dir" in out.stderr
    assert str(nowhere) in out.stderr.replace("\n", "")
    assert not nowhere.exists() and not (tmp_path / "x.jsonl").exists()
    data = tmp_path / "store"
    assert run(["ingest", str(conversation), "--user", "sam"], data).returncode == 0
    out = run(["export", "--user", "maya"], data)
    assert out.returncode == 2 and "'maya'" in out.stderr and "has no memories" in out.stderr
    assert run(["export", "--user", "sam"], data).stdout.count("\n") > 1


@pytest.mark.parametrize(
    "command", [["ingest", "-"], ["search", "x"], ["memories"], ["export"], ["consolidate"]]
)
@pytest.mark.parametrize("user", ["bad user", "../../etc", "x" * 129])
def test_the_cli_refuses_user_ids_the_api_refuses(tmp_path: Path, command: list[str], user: str) -> None:
    """They were accepted, and what was stored under them could never be reached over REST or MCP."""
    data = tmp_path / "store"
    out = run([*command, "--user", user], data, stdin='{"role": "user", "content": "hello"}\n')
    assert out.returncode == 2, out.stdout + out.stderr
    assert "not a user id the API accepts" in out.stderr.replace("\n", " ")
