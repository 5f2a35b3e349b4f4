"""The cost report's logic against moto: Cost Explorer results injected, SNS delivery observed."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from memstack.cost.report import METRIC_NAME, fetch_costs, format_message, run_cost_report, yesterday
from memstack.settings import load_settings

from tests.cost.conftest import Aws, ce_page, inject_ce_results

NOW = datetime(2026, 11, 29, 6, 0, tzinfo=UTC)
DAY, NEXT = "2026-11-28", "2026-11-29"


class RecordingCe:
    """Passes calls to the moto client and keeps the requests, to check what was asked."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.requests: list[dict[str, Any]] = []

    def get_cost_and_usage(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs)
        return self.client.get_cost_and_usage(**kwargs)


def settings_for(aws: Aws, tmp_path: Path, threshold: float) -> Any:
    return load_settings(
        data_dir=tmp_path,
        embedder="hashing",
        alert_topic_arn=aws.topic_arn,
        cost_report_threshold=threshold,
        project_tag="memstack",
    )


def test_yesterday_is_the_previous_utc_day_with_an_exclusive_end() -> None:
    late_in_tokyo = datetime(
        2026, 11, 29, 8, 30, tzinfo=timezone(timedelta(hours=9))
    )  # 23:30 UTC on the 28th
    assert yesterday(late_in_tokyo) == (date(2026, 11, 27), date(2026, 11, 28))
    assert yesterday(NOW) == (date(2026, 11, 28), date(2026, 11, 29))


def test_asks_for_yesterday_by_service_filtered_by_the_project_tag(aws: Aws) -> None:
    inject_ce_results(ce_page(DAY, NEXT, {"AWS Lambda": "1.5"}))
    ce = RecordingCe(aws.ce)
    by_service, currency, _ = fetch_costs(ce, date(2026, 11, 28), date(2026, 11, 29), "memstack")
    assert by_service == {"AWS Lambda": 1.5}
    assert currency == "USD"
    request = ce.requests[0]
    assert request["TimePeriod"] == {"Start": DAY, "End": NEXT}
    assert request["GroupBy"] == [{"Type": "DIMENSION", "Key": "SERVICE"}]
    assert request["Filter"] == {
        "Tags": {"Key": "Project", "Values": ["memstack"], "MatchOptions": ["EQUALS"]}
    }


def test_a_tier_narrows_the_filter_to_project_and_tier(aws: Aws, tmp_path: Path) -> None:
    """Two tiers in one account: each report counts only its own tier's spend."""
    inject_ce_results(ce_page(DAY, NEXT, {"AWS Lambda": "1.5"}))
    ce = RecordingCe(aws.ce)
    settings = load_settings(data_dir=tmp_path, embedder="hashing", tier_tag="small")
    report = run_cost_report(settings, ce_client=ce, sns_client=None, record_metric=None, now=NOW)
    assert ce.requests[0]["Filter"] == {
        "And": [
            {"Tags": {"Key": "Project", "Values": ["memstack"], "MatchOptions": ["EQUALS"]}},
            {"Tags": {"Key": "Tier", "Values": ["small"], "MatchOptions": ["EQUALS"]}},
        ]
    }
    assert report.to_dict()["tier_tag"] == "small"


def test_follows_pagination_and_orders_services_by_cost(aws: Aws) -> None:
    inject_ce_results(
        ce_page(DAY, NEXT, {"AWS Lambda": "0.40", "Amazon DynamoDB": "0.10"}, token="page-2"),
        ce_page(DAY, NEXT, {"Amazon Bedrock": "2.25", "AWS Lambda": "0.35"}),
    )
    ce = RecordingCe(aws.ce)
    by_service, _, _ = fetch_costs(ce, date(2026, 11, 28), date(2026, 11, 29), "memstack")
    assert list(by_service) == ["Amazon Bedrock", "AWS Lambda", "Amazon DynamoDB"]
    assert by_service["AWS Lambda"] == pytest.approx(0.75)
    assert ce.requests[1]["NextPageToken"] == "page-2"


def test_over_threshold_publishes_the_breakdown_and_records_the_total(aws: Aws, tmp_path: Path) -> None:
    inject_ce_results(ce_page(DAY, NEXT, {"Amazon OpenSearch Service": "9.80", "Amazon Bedrock": "3.15"}))
    recorded: list[tuple[str, float]] = []
    report = run_cost_report(
        settings_for(aws, tmp_path, 10.0),
        ce_client=aws.ce,
        sns_client=aws.sns,
        record_metric=lambda n, v: recorded.append((n, v)),
        now=NOW,
    )
    assert report.total == pytest.approx(12.95)
    assert report.over_threshold and report.published and report.message_id
    assert recorded == [(METRIC_NAME, pytest.approx(12.95))]
    [alert] = aws.alerts()
    assert "12.95 USD" in alert["Subject"]
    body = alert["Message"]
    assert "Total: 12.95 USD (threshold 10.00)" in body
    assert body.index("Amazon OpenSearch Service") < body.index("Amazon Bedrock")
    assert "9.80" in body and "3.15" in body


def test_under_threshold_stays_quiet_but_still_records_the_total(aws: Aws, tmp_path: Path) -> None:
    inject_ce_results(ce_page(DAY, NEXT, {"AWS Lambda": "0.42"}))
    recorded: list[tuple[str, float]] = []
    report = run_cost_report(
        settings_for(aws, tmp_path, 10.0),
        ce_client=aws.ce,
        sns_client=aws.sns,
        record_metric=lambda n, v: recorded.append((n, v)),
        now=NOW,
    )
    assert not report.published and not report.over_threshold
    assert recorded == [(METRIC_NAME, pytest.approx(0.42))]
    assert aws.alerts() == []


def test_no_cost_data_is_a_zero_total(aws: Aws, tmp_path: Path) -> None:
    recorded: list[tuple[str, float]] = []
    report = run_cost_report(
        settings_for(aws, tmp_path, 0.0),
        ce_client=aws.ce,
        sns_client=aws.sns,
        record_metric=lambda n, v: recorded.append((n, v)),
        now=NOW,
    )
    assert report.total == 0.0 and report.by_service == {}
    assert not report.published  # 0 is not above a 0 threshold
    assert recorded == [(METRIC_NAME, 0.0)]


def test_over_threshold_without_a_topic_says_why_nothing_was_sent(aws: Aws, tmp_path: Path) -> None:
    inject_ce_results(ce_page(DAY, NEXT, {"Amazon Bedrock": "50"}))
    settings = load_settings(data_dir=tmp_path, embedder="hashing", cost_report_threshold=1.0)
    report = run_cost_report(settings, ce_client=aws.ce, sns_client=None, record_metric=None, now=NOW)
    assert report.over_threshold and not report.published
    assert "MEMSTACK_ALERT_TOPIC_ARN" in (report.skipped_reason or "")


def test_subject_fits_sns_limit() -> None:
    from memstack.cost.report import CostReport

    report = CostReport(
        start=date(2026, 1, 1),
        end=date(2026, 1, 2),
        project_tag="x" * 200,
        currency="USD",
        total=1.0,
        by_service={"A": 1.0},
        threshold=0.5,
        estimated=True,
    )
    subject, body = format_message(report)
    assert len(subject) < 100
    assert "estimated" in body
