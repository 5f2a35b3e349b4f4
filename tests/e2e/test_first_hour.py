"""The first hour of a new user, one test per friction point found by trying the README."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memstack.api.app import close_app, create_app
from memstack.api.auth import ApiKeyAuthenticator
from memstack.cli.app import run
from memstack.factory import build_service
from memstack.settings import load_settings

from tests.api.conftest import Api


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's environment: a data directory of its own, the fast embedder."""
    data = tmp_path / "data"
    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(data))
    monkeypatch.setenv("MEMSTACK_EMBEDDER", "hashing")
    monkeypatch.setenv("COLUMNS", "160")
    return data


def jsonl(path: Path, *messages: dict) -> Path:
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


def not_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "a-file"
    file.write_text("x")
    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(file))


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["ingest", "missing.jsonl", "--user", "u"], "no such file"),
        (["memories", "--user", "u"], "is a file; it must be a directory"),
        (["search", "  ", "--user", "u"], "the query is empty"),
        (["eval", "locomo", "missing.json"], "missing.json"),
        (["serve", "--port", "0"], "is a file; it must be a directory"),
        (["mcp", "--url", "http://127.0.0.1:9"], "--url needs --api-key"),
        (["openapi"], "MEMSTACK_RRF_K"),
        (["cost-report", "--no-metric", "--no-publish"], "AWS call failed"),
        (["consolidate", "--user", "u"], "is a file; it must be a directory"),
        (["dlq", "list"], "is a file; it must be a directory"),
        (["dlq", "redrive"], "is a file; it must be a directory"),
        (["worker"], "is a file; it must be a directory"),
        (["search", "x"], "--user"),
        (["no-such-command"], "No such command"),
    ],
)
def test_every_command_that_fails_exits_non_zero(
    args: list[str],
    fragment: str,
    env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if "is a file" in fragment:
        not_a_directory(tmp_path, monkeypatch)
    if args[0] == "openapi":
        monkeypatch.setenv("MEMSTACK_RRF_K", "-3")
    if args[0] == "cost-report":  # no credentials anywhere, and no instance metadata to ask
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code = run(args)
    err = capsys.readouterr().err
    assert code != 0, err
    assert fragment in err
    assert "Traceback" not in err


def test_the_cli_and_the_local_server_share_one_default_tenant(env: Path) -> None:
    """What `memstack ingest` wrote, `memstack serve` with the dev key finds (and back)."""
    assert (
        run(["ingest", str(jsonl(env.parent / "m.jsonl", {"content": "I keep bees."})), "--user", "ann"]) == 0
    )
    settings = load_settings(data_dir=env, embedder="hashing")
    service = build_service(settings)
    api = Api(create_app(service, settings, ApiKeyAuthenticator(settings.api_key_map())))
    try:
        status, found = api(
            "POST", "/v1/memories/search", body={"user_id": "ann", "query": "bees"}, key="dev-key"
        )
        assert status == 200 and [r["content"] for r in found["results"]] == ["I keep bees."]
    finally:
        close_app(api.app)
        service.close()


def test_when_is_the_time_the_fact_was_said(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    said = jsonl(
        env.parent / "old.jsonl",
        {"content": "I am allergic to peanuts.", "timestamp": "2023-03-14T10:00:00Z"},
    )
    assert run(["ingest", str(said), "--user", "ann", "--sync"]) == 0
    out = capsys.readouterr().out
    assert "ingested 1 message for user" in out  # one message, not "1 messages"
    assert run(["memories", "--user", "ann", "--tier", "ltm"]) == 0
    table = capsys.readouterr().out
    assert "allergic to peanuts" in table and "2023-03-14" in table
    assert run(["search", "peanuts", "--user", "ann", "--top-k", "1"]) == 0
    assert "2023-03-14" in capsys.readouterr().out


def test_help_shows_no_python_types(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (
        ["ingest"],
        ["search"],
        ["memories"],
        ["serve"],
        ["mcp"],
        ["dlq", "list"],
        ["eval", "locomo"],
    ):
        assert run([*command, "--help"]) == 0
        text = capsys.readouterr().out
        assert "<bool>" not in text and "<str>" not in text, (command, text)
    run(["search", "--help"])
    assert "--top-k" in capsys.readouterr().out
