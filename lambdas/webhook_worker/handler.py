"""SQS webhook queue → signed deliveries to tenants' receivers (partial batch failure, once per event)."""

from __future__ import annotations

from typing import Any

from memstack.startup import cold_imports

with cold_imports():
    from memstack.workers.lambda_entry import logger, metrics, worker_for


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return worker_for("webhook").handle(event, context)
