"""pyproject.toml is the one source of dependencies: the requirements*.txt locks agree with it."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from memstack.extras import MODULE_EXTRAS
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from scripts.lock import LOCKS, MODEL_LOCKS, digest_line, model_lock

ROOT = Path(__file__).resolve().parents[2]
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]


def requirements_of(extras: tuple[str, ...]) -> dict[str, Requirement]:
    """Every requirement the extras bring, following ``memstack[...]`` self-references."""
    found: dict[str, Requirement] = {}
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for line in EXTRAS[extra]:
            req = Requirement(line)
            if canonicalize_name(req.name) == "memstack":
                todo.extend(req.extras)
            else:
                found[canonicalize_name(req.name)] = req
    return found


def pins(path: Path) -> dict[str, str]:
    pinned = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip().rstrip("\\").strip()
        if line and not line.startswith("-"):
            name, version = line.split("==", 1)
            pinned[canonicalize_name(name.split("[", 1)[0])] = version.strip()
    return pinned


@pytest.mark.parametrize("lock", LOCKS, ids=lambda lock: lock.path)
def test_each_lock_was_generated_from_this_pyproject(lock) -> None:  # type: ignore[no-untyped-def]
    first = (ROOT / lock.path).read_text().splitlines()[0]
    assert first == digest_line(), f"{lock.path} is stale: run `make lock`"


@pytest.mark.parametrize("lock", LOCKS, ids=lambda lock: lock.path)
def test_each_lock_pins_every_requirement_of_its_extras_within_its_bounds(lock) -> None:  # type: ignore[no-untyped-def]
    pinned = pins(ROOT / lock.path)
    for name, req in requirements_of(lock.extras).items():
        assert name in pinned, f"{lock.path} does not pin {name} (run `make lock`)"
        assert req.specifier.contains(pinned[name], prereleases=True), (lock.path, name, pinned[name])


def test_the_layer_lock_holds_no_command_line_or_laptop_package() -> None:
    pinned = pins(ROOT / "requirements-layer.txt")
    assert not pinned.keys() & {
        "typer",
        "rich",
        "waitress",
        "tokenizers",
        "safetensors",
        "torch",
        "matplotlib",
    }


@pytest.mark.parametrize(("path", "model"), MODEL_LOCKS.items())
def test_model_locks_are_written_from_the_catalog(path: str, model: str) -> None:
    assert (ROOT / path).read_text() == model_lock(model)


def test_every_extra_named_in_an_error_brings_that_module() -> None:
    """The one-line errors name an extra; that extra must really install the missing module."""
    providers = packages_distributions()
    for module, extra in MODULE_EXTRAS.items():
        dists = {canonicalize_name(d) for d in providers[module]}
        assert dists & requirements_of((extra,)).keys(), (module, extra, dists)


# Modules the client must never need (the `client` extra has none of them).
_NOT_CLIENT = (
    "numpy",
    "boto3",
    "botocore",
    "typer",
    "rich",
    "dateparser",
    "aws_lambda_powertools",
    "waitress",
)
_BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(name, name=name)
        return None
sys.meta_path.insert(0, Block())
from memstack.client import AsyncMemoryClient, MemoryClient
client = MemoryClient("http://127.0.0.1:9", api_key="k")
client.close()
print("ok")
"""


def test_the_client_imports_without_numpy_or_the_aws_sdk() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    done = subprocess.run(
        [sys.executable, "-c", _BLOCK.format(blocked=_NOT_CLIENT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
