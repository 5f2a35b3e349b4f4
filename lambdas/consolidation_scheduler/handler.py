"""EventBridge schedule → find users with enough unconsolidated STM → one consolidate job each on SQS."""

from __future__ import annotations

from typing import Any

from memstack.startup import cold_imports

with cold_imports():
    from memstack.workers.lambda_entry import logger, metrics, scheduler_run


@metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return scheduler_run()
