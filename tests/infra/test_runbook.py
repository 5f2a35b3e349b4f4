"""docs/operations.md explains every alarm the stacks create (every tier, and the serverless variant)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.conftest import Synth

pytestmark = pytest.mark.slow

RUNBOOK = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()


@pytest.mark.parametrize("tier", ["small", "medium", "large", "serverless"])
def test_every_alarm_has_its_entry_in_the_runbook(tier: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(tier)
    alarms = [a.node.id for a in synth.stack.observability.alarms]
    assert alarms
    missing = [a for a in alarms if f"`{a}`" not in RUNBOOK]
    assert not missing, f"docs/operations.md does not say what these alarms mean: {missing}"


def test_the_runbook_covers_the_day_after() -> None:
    for section in (
        "## Dead-letter queues",
        "memstack dlq redrive",
        "start-message-move-task",
        "## Point-in-time restore",
        "restore-table-to-point-in-time",
        "## Upgrading",
        "memstack opensearch reindex",
        "## Rotating Bedrock models",
        "bedrock:InferenceProfileArn",
        "## Erasing a user on request",
    ):
        assert section in RUNBOOK, section
