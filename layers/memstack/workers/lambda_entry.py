"""What the worker and scheduler Lambdas share: one service per container, built from ``MEMSTACK_*``.

The handlers in ``lambdas/`` stay thin: they call ``worker_for(job_type)`` or
``scheduler_run``. Everything is built on the first invocation (not at import),
so a test imports a handler module without touching AWS, and a warm container
reuses its clients.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

# Before anything imports pydantic (memstack's settings and models do): Powertools' batch utility
# imports its parser's pydantic event models when pydantic is already loaded, only to type the
# ``model=`` argument, which the workers never pass (about 27 ms of a worker's cold start).
# tests/api/test_cold_import.py fails if the parser is loaded again.
import aws_lambda_powertools.utilities.batch  # noqa: F401
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from memstack.adapters.queue.sqs_arns import SqsReceiveLimit
from memstack.adapters.queue.sqs_backoff import SqsThrottleBackoff
from memstack.adapters.queue.sqs_visibility import SqsVisibilityHeartbeat
from memstack.errors import SettingsError
from memstack.factory import build_service
from memstack.service import MemoryService
from memstack.settings import Settings, get_settings
from memstack.workers.sqs import JobWorker

# The service name comes from POWERTOOLS_SERVICE_NAME: the stack gives each function its own
# (<service_name>-extraction, -consolidation, -scheduler) and its dashboard reads the same names.
logger = Logger()
# Powertools Metrics instances share one metric set: this flushes the model token counts too.
metrics = Metrics(namespace="memstack")


def emit_extraction_operations(ops: list[str]) -> None:
    """One ``ExtractionOperations`` count per decided operation, dimensioned by its kind.

    ``single_metric`` because each count carries its own ``operation`` dimension,
    which the shared metric set (one set of dimensions per flush) cannot hold.
    """
    from collections import Counter

    from aws_lambda_powertools.metrics import single_metric

    for op, count in Counter(ops).items():
        with single_metric(
            name="ExtractionOperations", unit=MetricUnit.Count, value=count, namespace="memstack"
        ) as metric:
            metric.add_dimension(name="service", value=metrics.service or "memstack")
            metric.add_dimension(name="operation", value=op)


@lru_cache(maxsize=1)
def service_from_environment(*, embeds: bool = True) -> MemoryService:
    """The service of a worker function; ``embeds=False`` for one that never embeds or reads vectors
    (the scheduler: its role reaches the short-term store and the queues, not the memory store)."""
    service = build_service(get_settings(), embedder_check=embeds)
    extract = service.job_handlers.get("extract")
    if extract is not None and hasattr(extract, "on_operations"):
        extract.on_operations = emit_extraction_operations
    return service


def persistence_layer(settings: Settings, client: Any = None) -> Any:
    """Powertools' DynamoDB idempotency store on ``MEMSTACK_IDEMPOTENCY_TABLE`` (client injectable)."""
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    if not settings.aws.idempotency_table:
        raise SettingsError("the queue workers need MEMSTACK_IDEMPOTENCY_TABLE")
    return DynamoDBPersistenceLayer(table_name=settings.aws.idempotency_table, boto3_client=client)


def build_worker(job_type: str, service: MemoryService, persistence: Any, sqs: Any = None) -> JobWorker:
    """The worker of one queue; ``sqs`` (a client, created lazily by default) renews message leases."""
    settings = service.settings
    return JobWorker(
        service.process_job,
        {job_type},
        persistence,
        settings.queue.job_idempotency_seconds,
        metrics=metrics,
        visibility=SqsVisibilityHeartbeat(
            sqs, lease_seconds=round(settings.queue.queue_lease_seconds), region=settings.aws.aws_region
        ),
        backoff=SqsThrottleBackoff(sqs, region=settings.aws.aws_region),
        recorder=service.job_recorder,
        limit=SqsReceiveLimit(sqs, region=settings.aws.aws_region),
    )


@lru_cache(maxsize=4)
def worker_for(job_type: str) -> JobWorker:
    service = service_from_environment()
    return build_worker(job_type, service, persistence_layer(service.settings))


def scheduler_run() -> dict[str, Any]:
    """One scheduled pass: purge expired STM, re-send lost extraction jobs, fan out consolidate jobs."""
    result = service_from_environment(embeds=False).schedule_consolidation()
    metrics.add_metric(name="ConsolidationJobsScheduled", unit=MetricUnit.Count, value=result["jobs"])
    metrics.add_metric(name="StmExpiredPurged", unit=MetricUnit.Count, value=result["purged_expired"] or 0)
    logger.info(
        "consolidation scheduled",
        extra={
            "jobs": result["jobs"],
            "purged": result["purged_expired"],
            "reenqueued_extractions": result.get("reenqueued_extractions", 0),
        },
    )
    return result
