"""The cost report Lambda handler in-process (Powertools test context) and the CLI, under moto."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from tests.cost.conftest import Aws, ce_page, inject_ce_results

HANDLER = Path(__file__).resolve().parents[2] / "lambdas" / "cost_report" / "handler.py"


def _yesterday() -> tuple[str, str]:
    today = datetime.now(UTC).date()
    return (today - timedelta(days=1)).isoformat(), today.isoformat()


@dataclass
class LambdaContext:
    """The fields Powertools reads from the Lambda context (as in its testing guide)."""

    function_name: str = "memstack-cost-report"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:memstack-cost-report"
    aws_request_id: str = "8f0c4b2e-0000-4000-8000-000000000001"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


SCHEDULED_EVENT = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": "123456789012",
    "time": "2026-11-29T06:00:00Z",
    "region": "us-east-1",
    "resources": ["arn:aws:events:us-east-1:123456789012:rule/memstack-cost-report"],
    "detail": {},
}


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, aws: Aws) -> Aws:
    monkeypatch.setenv("MEMSTACK_ALERT_TOPIC_ARN", aws.topic_arn)
    monkeypatch.setenv("MEMSTACK_COST_REPORT_THRESHOLD", "5")
    monkeypatch.setenv("MEMSTACK_PROJECT_TAG", "memstack")
    monkeypatch.setenv("MEMSTACK_AWS_REGION", "us-east-1")
    monkeypatch.setenv("MEMSTACK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "memstack-cost")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    return aws


def load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cost_report_handler", HANDLER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_handler_reports_publishes_and_emits_the_metric(
    lambda_env: Aws, capsys: pytest.CaptureFixture[str]
) -> None:
    day, next_day = _yesterday()
    inject_ce_results(ce_page(day, next_day, {"Amazon Bedrock": "4.00", "AWS Lambda": "2.50"}))
    handler = load_handler()
    result = handler.handler(SCHEDULED_EVENT, LambdaContext())
    assert result["date"] == day
    assert result["total"] == pytest.approx(6.5)
    assert result["by_service"] == {"Amazon Bedrock": 4.0, "AWS Lambda": 2.5}
    assert result["published"] is True
    [alert] = lambda_env.alerts()
    assert "Amazon Bedrock" in alert["Message"]
    # Powertools flushes the metric as one EMF line on stdout.
    emf = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [blob] = [b for b in emf if "DailyCost" in b]
    assert blob["DailyCost"] in (pytest.approx(6.5), [pytest.approx(6.5)])  # EMF may list values
    assert blob["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "memstack"
    assert blob["service"] == "memstack-cost"


def test_handler_under_threshold_does_not_alert(lambda_env: Aws) -> None:
    day, next_day = _yesterday()
    inject_ce_results(ce_page(day, next_day, {"AWS Lambda": "0.05"}))
    result = load_handler().handler(SCHEDULED_EVENT, LambdaContext())
    assert result["published"] is False and result["over_threshold"] is False
    assert lambda_env.alerts() == []


def test_cli_prints_json_and_records_the_metric(lambda_env: Aws) -> None:
    from memstack.cli import app

    day, next_day = _yesterday()
    inject_ce_results(ce_page(day, next_day, {"Amazon DynamoDB": "0.75"}))
    out = CliRunner().invoke(app, ["cost-report", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["total"] == pytest.approx(0.75) and result["by_service"] == {"Amazon DynamoDB": 0.75}
    assert result["published"] is False
    metrics = lambda_env.cloudwatch.list_metrics(Namespace="memstack", MetricName="DailyCost")["Metrics"]
    assert metrics and metrics[0]["Dimensions"] == [{"Name": "service", "Value": "memstack-cost"}]


def test_cli_threshold_override_publishes(lambda_env: Aws) -> None:
    from memstack.cli import app

    day, next_day = _yesterday()
    inject_ce_results(ce_page(day, next_day, {"Amazon DynamoDB": "0.75"}))
    out = CliRunner().invoke(app, ["cost-report", "--json", "--threshold", "0.5", "--no-metric"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["published"] is True
    assert len(lambda_env.alerts()) == 1
