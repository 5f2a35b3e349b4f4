"""``memstack --version``, the single-sourced version, and one-line errors for a missing extra."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from memstack import __version__
from memstack.cli.app import run

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, *args: str, data_dir: Path, **memstack_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env["MEMSTACK_DATA_DIR"] = str(data_dir)
    env.update({f"MEMSTACK_{k.upper()}": v for k, v in memstack_env.items()})
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_the_version_is_written_once_and_pyproject_reads_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "memstack.__version__"}
    assert __version__ != "0.1.0"
    assert "## Unreleased" in (ROOT / "CHANGELOG.md").read_text().splitlines()[:20]


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"memstack {__version__}"


def test_python_dash_m_memstack_version(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memstack", "--version"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"memstack {__version__}"


# A subprocess in which importing one module fails as it does when its extra is not installed.
BLOCKED = "import sys; sys.modules[sys.argv[1]] = None; sys.argv[1:2] = []; sys.argv[0] = 'memstack'; "


def test_without_the_cli_extra_the_command_says_which_extra(tmp_path: Path) -> None:
    done = python(BLOCKED + "from memstack.__main__ import main; main()", "typer", "serve", data_dir=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: memstack's command line: this needs the 'server' extra (typer is not installed): "
        "pip install 'memstack[server]'"
    ]


def test_version_answers_without_the_cli_extra(tmp_path: Path) -> None:
    done = python(
        BLOCKED + "from memstack.__main__ import main; main()", "typer", "--version", data_dir=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"memstack {__version__}"


def test_a_command_whose_extra_is_missing_fails_in_one_line(tmp_path: Path) -> None:
    """``memstack search`` on the postgres backend without psycopg: the 'postgres' extra, no traceback."""
    done = python(
        BLOCKED + "from memstack.__main__ import main; main()",
        "psycopg",
        "search",
        "where do I live",
        "--user",
        "u",
        data_dir=tmp_path,
        store_backend="postgres",
        postgres_dsn="postgresql://127.0.0.1:9/none",
        embedder="hashing",
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: this needs the 'postgres' extra (psycopg is not installed): pip install 'memstack[postgres]'"
    ]


def test_own_module_errors_are_not_hidden() -> None:
    from memstack.extras import missing_module_hint

    assert missing_module_hint(ModuleNotFoundError("x", name="memstack.nope")) is None
    assert missing_module_hint(ModuleNotFoundError("x", name="psycopg_pool")) == (
        "this needs the 'postgres' extra (psycopg_pool is not installed): pip install 'memstack[postgres]'"
    )
