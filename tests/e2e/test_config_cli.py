"""``memstack config show|set|patch``: the tenant configuration from the command line (in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memstack.cli import run


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMSTACK_EMBEDDER", "hashing")
    return tmp_path


def test_show_set_patch_and_errors(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["config", "show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 0 and shown["config"]["categories"]["mode"] == "extend"

    path = env / "config.json"
    pets = {"name": "pets", "description": "the user's pets", "keywords": ["dog"]}
    path.write_text(json.dumps({"categories": {"custom": [pets]}}))
    assert run(["config", "set", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 1
    assert (
        run(["config", "patch", '{"extraction": {"ignore": {"categories": ["pets"]}}}', "--if-version", "1"])
        == 0
    )
    patched = json.loads(capsys.readouterr().out)
    assert patched["version"] == 2 and patched["config"]["categories"]["custom"] == [pets]
    # Another tenant of the same data directory has its own.
    assert run(["config", "show", "--tenant", "other"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 0

    assert run(["config", "patch", '{"extraction": {"instructions": "x"}}', "--if-version", "1"]) == 1
    assert "precondition_failed" in capsys.readouterr().err
    assert run(["config", "patch", '{"categories": {"mode": "replace", "custom": []}}']) == 1
    err = capsys.readouterr().err
    assert "validation_error" in err and "at least one custom category" in err
    assert run(["config", "set", str(env / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert run(["config", "patch", "{nope"]) == 2
    assert "is not JSON" in capsys.readouterr().err
    assert run(["config", "show"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 2


def test_memories_and_search_filter_on_the_tenants_categories(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pets = {"name": "pets", "description": "the user's pets", "keywords": ["dog", "vet"]}
    assert run(["config", "patch", json.dumps({"categories": {"custom": [pets]}})]) == 0
    turns = env / "turns.jsonl"
    said = ["My dog Biscuit saw the vet.", "I play the cello every weekend."]
    turns.write_text("".join(json.dumps({"role": "user", "content": t}) + "\n" for t in said))
    assert run(["ingest", str(turns), "--user", "maya", "--sync"]) == 0
    capsys.readouterr()
    assert run(["memories", "--user", "maya", "--tier", "ltm", "--category", "pets", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["memories"]
    assert [m["category"] for m in listed] == ["pets"] and "Biscuit" in listed[0]["content"]
    assert run(["search", "what instrument", "--user", "maya", "--category", "hobbies", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["results"]
    assert found and {h["category"] for h in found} == {"hobbies"}
    assert run(["memories", "--user", "maya", "--category", "cars"]) == 1
    assert "'cars' is not a category of this tenant" in capsys.readouterr().err
