"""Yesterday's cost by service for the project and tier tags; alert when the total exceeds the threshold.

The Cost Explorer and SNS clients and the metric sink are passed in (the
Lambda handler, the CLI and the tests each bring their own), so this module
never creates AWS clients itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

from memstack.cost.tags import cost_explorer_filter
from memstack.settings import Settings

# Unblended cost is what the bill shows per service (no RI/SP amortisation smoothing).
COST_METRIC = "UnblendedCost"
METRIC_NAME = "DailyCost"

MetricSink = Callable[[str, float], None]
"""Records one metric value (name, value); the handler's emits EMF, the CLI's calls PutMetricData."""


@dataclass(frozen=True)
class CostReport:
    start: date
    end: date  # exclusive, as Cost Explorer counts
    project_tag: str
    currency: str
    total: float
    by_service: dict[str, float]  # largest first
    threshold: float
    estimated: bool
    tier_tag: str | None = None
    published: bool = False
    message_id: str | None = None
    skipped_reason: str | None = None

    @property
    def over_threshold(self) -> bool:
        return self.total > self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "date": self.start.isoformat(),
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "project_tag": self.project_tag,
            "tier_tag": self.tier_tag,
            "currency": self.currency,
            "total": round(self.total, 4),
            "by_service": {k: round(v, 4) for k, v in self.by_service.items()},
            "threshold": self.threshold,
            "over_threshold": self.over_threshold,
            "estimated": self.estimated,
            "published": self.published,
            "message_id": self.message_id,
            "skipped_reason": self.skipped_reason,
        }


def yesterday(now: datetime) -> tuple[date, date]:
    """[yesterday, today) in UTC: Cost Explorer's days are UTC days and its end date is exclusive."""
    today = now.astimezone(UTC).date()
    return today - timedelta(days=1), today


def fetch_costs(
    ce_client: Any, start: date, end: date, project_tag: str, tier_tag: str | None = None
) -> tuple[dict[str, float], str, bool]:
    """Cost per service for the tags, following pagination. Returns (by_service, currency, estimated)."""
    request: dict[str, Any] = {
        "TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
        "Granularity": "DAILY",
        "Metrics": [COST_METRIC],
        "Filter": cost_explorer_filter(project_tag, tier_tag),
        "GroupBy": [{"Type": "DIMENSION", "Key": "SERVICE"}],
    }
    by_service: dict[str, float] = {}
    currency = "USD"
    estimated = False
    while True:
        page = ce_client.get_cost_and_usage(**request)
        for period in page.get("ResultsByTime", []):
            estimated = estimated or bool(period.get("Estimated", False))
            for group in period.get("Groups", []):
                service = group["Keys"][0]
                amount = group["Metrics"][COST_METRIC]
                by_service[service] = by_service.get(service, 0.0) + float(amount["Amount"])
                currency = amount.get("Unit") or currency
        token = page.get("NextPageToken")
        if not token:
            break
        request["NextPageToken"] = token
    ordered = dict(sorted(by_service.items(), key=lambda kv: (-kv[1], kv[0])))
    return ordered, currency, estimated


def format_message(report: CostReport) -> tuple[str, str]:
    """(subject, body) of the alert: the total against the threshold, then every service."""
    subject = (
        f"{report.project_tag} cost {report.start.isoformat()}: {report.total:.2f} {report.currency} "
        f"(threshold {report.threshold:.2f})"
    )[:99]  # SNS subjects must stay under 100 characters
    width = max((len(s) for s in report.by_service), default=7)
    lines = [
        f"Cost for Project={report.project_tag}"
        + (f", Tier={report.tier_tag}" if report.tier_tag else "")
        + f" on {report.start.isoformat()} (UTC)"
        + (" - estimated, Cost Explorer may still revise it" if report.estimated else ""),
        f"Total: {report.total:.2f} {report.currency} (threshold {report.threshold:.2f})",
        "",
        *(f"{name.ljust(width)}  {amount:10.2f}" for name, amount in report.by_service.items()),
    ]
    return subject, "\n".join(lines)


def run_cost_report(
    settings: Settings,
    *,
    ce_client: Any,
    sns_client: Any | None,
    record_metric: MetricSink | None,
    now: datetime | None = None,
    publish: bool = True,
) -> CostReport:
    """Fetch yesterday's costs, always record the total, publish the breakdown when over the threshold."""
    start, end = yesterday(now or datetime.now(UTC))
    by_service, currency, estimated = fetch_costs(
        ce_client, start, end, settings.cost.project_tag, settings.cost.tier_tag
    )
    total = sum(by_service.values())
    report = CostReport(
        start=start,
        end=end,
        project_tag=settings.cost.project_tag,
        tier_tag=settings.cost.tier_tag,
        currency=currency,
        total=total,
        by_service=by_service,
        threshold=settings.cost.cost_report_threshold,
        estimated=estimated,
    )
    if record_metric is not None:
        record_metric(METRIC_NAME, total)
    if not report.over_threshold:
        return report
    if not publish:
        return replace(report, skipped_reason="publishing disabled")
    if sns_client is None or not settings.cost.alert_topic_arn:
        return replace(report, skipped_reason="no alert topic configured (MEMSTACK_ALERT_TOPIC_ARN)")
    subject, body = format_message(report)
    response = sns_client.publish(TopicArn=settings.cost.alert_topic_arn, Subject=subject, Message=body)
    return replace(report, published=True, message_id=response.get("MessageId"))
