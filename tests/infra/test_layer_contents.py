"""What the Lambda layer leaves out, the handlers never import; what it compiles, it finds a Python for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from memstack.bench.coldstart import lambda_environment

from scripts.build_layer import CLI_ONLY, NEVER_IMPORTED, layer_requirements

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(p.parent.name for p in (ROOT / "lambdas").glob("*/handler.py"))

# What the layer leaves out, as import names: importing any of them raises, as in Lambda.
LEFT_OUT = {*CLI_ONLY, "grpc", "google.protobuf", "opensearch"}
_BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in {blocked!r}):
            raise ImportError(f"{{name}} is not in the Lambda layer")
        return None
sys.meta_path.insert(0, Block())
sys.path.insert(0, sys.argv[1])
import handler
import memstack.adapters.opensearch.store, memstack.adapters.opensearch.client  # the medium/large tiers
"""


def test_the_layer_leaves_out_the_command_line_packages() -> None:
    names = {p.split("==")[0].lower() for p in layer_requirements(ROOT / "requirements.txt")}
    assert not names & set(CLI_ONLY) and not names & set(NEVER_IMPORTED)
    assert {"pydantic", "numpy", "aws-lambda-powertools", "threadpoolctl"} <= names


@pytest.mark.parametrize("function", HANDLERS)
def test_every_handler_imports_without_them(function: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(lambda_environment(function))
    result = subprocess.run(
        [sys.executable, "-c", _BLOCK.format(blocked=LEFT_OUT), str(ROOT / "lambdas" / function)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
