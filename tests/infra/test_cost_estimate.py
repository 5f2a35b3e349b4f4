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


@pytest.mark.parametrize("variant", ["serverless", "postgres_small", "medium_postgres"])
def test_the_variants_fixed_costs_in_the_docs_match_their_templates(
    variant: str, request: pytest.FixtureRequest
) -> None:
    """Issue 23, item 7: OpenSearch Serverless' floor is 2 OCU with redundancy (was priced as 4), and
    the Aurora floor and its secret are counted from the template; the medium tier on Aurora has its
    own table (docs/deploy.md once quoted a figure for it that matched neither table)."""
    synth: Synth = request.getfixturevalue(variant)
    rendered = table(fixed_costs(synth.raw), "fixed (no traffic)")
    assert rendered in DEPLOY_MD.read_text(), (
        "docs/deploy.md no longer matches the template: run scripts/cost_estimate.py and paste its tables\n"
        + rendered
    )


def test_the_aoss_floor_is_two_ocu_at_list_price() -> None:
    from scripts.cost_estimate import AOSS_MIN_OCU, HOURS, PRICES

    # 1 OCU indexing + 1 OCU search, each 0.5 OCU x 2 with standby replicas (AWS's capacity page).
    assert AOSS_MIN_OCU == 2
    assert round(AOSS_MIN_OCU * PRICES["aoss_ocu_hour"] * HOURS, 2) == 350.40
    backends = (DEPLOY_MD.parent / "backends.md").read_text()
    one_acu = round(1 * PRICES["aurora_acu_hour"] * HOURS)
    assert f"≈ ${one_acu} with a 1-ACU floor" in backends  # $87.60, docs once said $120


def test_alarm_metrics_count_every_metric_a_math_alarm_reads(small: Synth) -> None:
    alarms, metrics = alarm_metrics(small.raw)
    assert alarms == len(small.props("AWS::CloudWatch::Alarm"))
    assert metrics > alarms  # the Bedrock token alarm sums one metric per model


def test_request_costs_price_the_models_the_functions_are_configured_with(small: Synth) -> None:
    rows = {what: usd for what, _, usd in request_costs(small.raw, TRAFFIC["small"])}
    assert rows["Bedrock extraction tokens"] > 0 and rows["Bedrock consolidation tokens"] > 0
    assert "DynamoDB storage + PITR (memories)" in rows  # the small tier keeps memories in DynamoDB


def test_the_opensearch_floor_in_backends_md_is_the_medium_templates(medium: Synth) -> None:
    """docs/backends.md once said $215 for what the medium template prices at $210.76."""
    rows = {what: usd for what, _, usd in fixed_costs(medium.raw)}
    floor = sum(usd for what, usd in rows.items() if what.startswith("OpenSearch"))
    backends = (DEPLOY_MD.parent / "backends.md").read_text()
    assert f"≈ ${round(floor)} floor before traffic" in backends, floor
    for what, usd in rows.items():
        if what.startswith("OpenSearch"):
            assert f"${usd:,.2f}" in backends, what
