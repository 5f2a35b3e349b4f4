"""docs/operations.md explains every alarm the stacks create (every tier, and the serverless variant)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.infra.conftest import Synth

pytestmark = pytest.mark.slow

RUNBOOK = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()


@pytest.mark.parametrize("tier", ["small", "medium", "large", "serverless", "postgres_small"])
def test_every_alarm_has_a_stable_name_the_runbook_explains(
    tier: str, request: pytest.FixtureRequest
) -> None:
    """Issue 23, item 8: each alarm is named ``<service>-<tier>-<purpose>`` in the template (not a name
    CloudFormation generates), and the runbook has an entry for that purpose."""
    synth: Synth = request.getfixturevalue(tier)
    config = synth.stack.config
    names = [p.get("AlarmName") for p in synth.props("AWS::CloudWatch::Alarm")]
    assert names and all(isinstance(n, str) for n in names), names
    assert len(set(names)) == len(names)
    prefix = f"{config.service_name}-{config.tier}-"
    assert all(n.startswith(prefix) and len(n) <= 255 for n in names), names
    missing = [n for n in names if f"`{n.removeprefix(prefix)}`" not in RUNBOOK]
    assert not missing, f"docs/operations.md does not say what these alarms mean: {missing}"
    assert f"`{config.service_name}-<tier>-<alarm>`" in RUNBOOK


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
