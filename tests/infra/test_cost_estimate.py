"""docs/deploy.md's fixed costs are the ones counted from the template the tests synthesise."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.cost_estimate import TRAFFIC, alarm_metrics, fixed_costs, request_costs, table
from tests.infra.conftest import Synth

pytestmark = pytest.mark.slow

DEPLOY_MD = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


def test_the_small_tiers_fixed_cost_in_the_docs_matches_its_template(small: Synth) -> None:
    rendered = table(fixed_costs(small.raw), "fixed (no traffic)")
    assert rendered in DEPLOY_MD.read_text(), (
        "docs/deploy.md no longer matches the template: run scripts/cost_estimate.py and paste its tables\n"
        + rendered
    )


def test_alarm_metrics_count_every_metric_a_math_alarm_reads(small: Synth) -> None:
    alarms, metrics = alarm_metrics(small.raw)
    assert alarms == len(small.props("AWS::CloudWatch::Alarm"))
    assert metrics > alarms  # the Bedrock token alarm sums one metric per model


def test_request_costs_price_the_models_the_functions_are_configured_with(small: Synth) -> None:
    rows = {what: usd for what, _, usd in request_costs(small.raw, TRAFFIC["small"])}
    assert rows["Bedrock extraction tokens"] > 0 and rows["Bedrock consolidation tokens"] > 0
    assert "DynamoDB storage + PITR (memories)" in rows  # the small tier keeps memories in DynamoDB
