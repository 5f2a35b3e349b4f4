"""Synthesise the CDK app in-process, once per tier (synth is the slow part; ``small`` once per session).

The layer is a small stand-in folder holding the memstack package source (the
real one, built by scripts/build_layer.py, is ~100 MB and only its path
matters to the template); the handlers are the real lambdas/ folders.
cdk-nag's AwsSolutions checks run in every synth: an unacknowledged finding
makes ``app.synth()`` raise, so a synth that returns is a clean one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Synth:
    stack: Any
    template: Any  # aws_cdk.assertions.Template
    raw: dict[str, Any]
    outdir: Path

    def resources(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.raw["Resources"].items() if v["Type"] == type_}

    def props(self, type_: str) -> list[dict[str, Any]]:
        return [v.get("Properties", {}) for v in self.resources(type_).values()]


@pytest.fixture(scope="session")
def layer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    layer = tmp_path_factory.mktemp("layer")
    shutil.copytree(
        ROOT / "layers" / "memstack",
        layer / "python" / "memstack",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return layer


def synth(tier: str, layer_dir: Path, outdir: Path, **context: Any) -> Synth:
    from aws_cdk.assertions import Template

    from stacks.memstack_stack import create_app

    app, stack = create_app({"tier": tier, "layer_dir": str(layer_dir), **context}, outdir=str(outdir))
    assembly = app.synth()
    raw = assembly.get_stack_by_name(stack.stack_name).template
    return Synth(stack=stack, template=Template.from_json(raw), raw=raw, outdir=outdir)


#: the small tier as the tests synthesise it: a reranker and an alert e-mail, so both are wired, and a
#: user's snapshot stored every 2 writes, so the deployed flow stores, loads and erases some
SMALL_CONTEXT = {
    "bedrock_rerank_model_arn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0",
    "alert_email": "ops@example.com",
    "settings": {"snapshot_compact_writes": 2},
}


@pytest.fixture(scope="session")
def small(layer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """One synth of the small tier for every test in the session (its properties and the deployed flow)."""
    return synth("small", layer_dir, tmp_path_factory.mktemp("cdk-small"), **SMALL_CONTEXT)


@pytest.fixture(scope="session")
def medium(layer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth("medium", layer_dir, tmp_path_factory.mktemp("cdk-medium"))


@pytest.fixture(scope="session")
def large(layer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synth("large", layer_dir, tmp_path_factory.mktemp("cdk-large"))


@pytest.fixture(scope="session")
def serverless(layer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The medium tier on an OpenSearch Serverless collection instead of a domain."""
    return synth("medium", layer_dir, tmp_path_factory.mktemp("cdk-aoss"), opensearch_serverless="true")


@pytest.fixture(scope="session")
def postgres_small(layer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The small tier on Aurora PostgreSQL (``store_backend=postgres``), once per session."""
    return synth("small", layer_dir, tmp_path_factory.mktemp("cdk-pg-small"), store_backend="postgres")


@pytest.fixture(scope="session")
def medium_postgres(layer_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The medium tier on Aurora PostgreSQL, once per session (its properties and its cost table)."""
    return synth("medium", layer_dir, tmp_path_factory.mktemp("cdk-aurora"), store_backend="postgres")


def effective(env: dict[str, Any], name: str) -> Any:
    """What the function reads for a setting: its variable, else the default (the stack omits defaults)."""
    from stacks.constructs.environment import default_of, env_value

    return env.get(f"MEMSTACK_{name.upper()}", env_value(default_of(name)))
