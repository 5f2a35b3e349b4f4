"""Daily cost report (EventBridge schedule): yesterday's cost by service, alert over the threshold.

Thin: the logic is memstack.cost.report; this wires the AWS clients,
Powertools logging/tracing/metrics and the settings from MEMSTACK_* env.
"""

from __future__ import annotations

from typing import Any

from memstack.startup import cold_imports

with cold_imports():
    import boto3
    from aws_lambda_powertools import Logger, Metrics, Tracer
    from aws_lambda_powertools.utilities.typing import LambdaContext
    from memstack.cost.report import run_cost_report
    from memstack.cost.sinks import NAMESPACE, powertools_sink
    from memstack.settings import load_settings

logger = Logger()
# Only botocore: every AWS call the function makes goes through it. Patching every library X-Ray
# knows would import the ones the function never uses (httpx alone is ~10% of a cold import).
tracer = Tracer(patch_modules=("botocore",))
metrics = Metrics(namespace=NAMESPACE)

# Cost Explorer has a single endpoint, in us-east-1, whatever region the stack is in.
CE_REGION = "us-east-1"


@logger.inject_lambda_context(log_event=False)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(
    event: dict[str, Any], context: LambdaContext, ce_client: Any = None, sns_client: Any = None
) -> dict[str, Any]:
    """Lambda passes (event, context); the clients are created here unless a caller brings its own."""
    settings = load_settings()  # once a day: read fresh, no cache to go stale
    if sns_client is None and settings.cost.alert_topic_arn:
        sns_client = boto3.client("sns", region_name=settings.aws.aws_region)
    report = run_cost_report(
        settings,
        ce_client=ce_client or boto3.client("ce", region_name=CE_REGION),
        sns_client=sns_client,
        record_metric=powertools_sink(metrics),
    )
    result = report.to_dict()
    logger.info("cost_report", extra={"event": "cost_report", **result})
    return result
