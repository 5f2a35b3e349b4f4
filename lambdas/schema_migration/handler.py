"""CloudFormation custom resource: the store's deploy-time upgrade (postgres migrations, dynamodb backfill).

Thin: the logic is memstack.workers.schema_migration; ``respond`` is
injectable (a test answers CloudFormation itself).
"""

from __future__ import annotations

from typing import Any

from memstack.startup import cold_imports

with cold_imports():
    from aws_lambda_powertools import Logger
    from memstack.settings import load_settings
    from memstack.workers.schema_migration import Respond, on_event, put_response

logger = Logger()


@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: Any, respond: Respond = put_response) -> dict[str, Any]:
    seconds_left = context.get_remaining_time_in_millis() / 1000
    answer = on_event(event, load_settings(), respond, seconds_left)
    logger.info(
        "store upgrade",
        extra={"status": answer["Status"], "request": event["RequestType"], "data": answer.get("Data")},
    )
    return answer
