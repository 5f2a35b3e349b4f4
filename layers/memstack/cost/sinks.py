"""Where the daily total goes: EMF through Powertools in Lambda, PutMetricData from the CLI.

Both land on the same metric (namespace ``memstack``, dimension
``service=<service>-cost``), so the dashboard and any alarm see one series.
"""

from __future__ import annotations

from typing import Any

from memstack.cost.report import MetricSink

NAMESPACE = "memstack"
COST_SERVICE = "memstack-cost"


def powertools_sink(metrics: Any) -> MetricSink:
    """``metrics`` is a Powertools ``Metrics``; values are flushed by its ``log_metrics`` decorator."""
    from aws_lambda_powertools.metrics import MetricUnit

    def record(name: str, value: float) -> None:
        metrics.add_metric(name=name, unit=MetricUnit.NoUnit, value=value)

    return record


def cloudwatch_sink(cloudwatch_client: Any, service: str = COST_SERVICE) -> MetricSink:
    def record(name: str, value: float) -> None:
        cloudwatch_client.put_metric_data(
            Namespace=NAMESPACE,
            MetricData=[
                {
                    "MetricName": name,
                    "Value": value,
                    "Unit": "None",
                    "Dimensions": [{"Name": "service", "Value": service}],
                }
            ],
        )

    return record
