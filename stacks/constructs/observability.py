"""CloudWatch alarms (all to the alert topic) and the memstack dashboard.

Custom metrics come from Powertools Metrics (EMF) in namespace ``memstack``
with a ``service`` dimension equal to each function's POWERTOOLS_SERVICE_NAME,
which the functions take from their environment and this module from the
same ``compute.service_name`` (``<service_name>-api``, ``-extraction``, ...).
The per-stage timings are not metrics: the retrieval pipeline logs one
``memory_retrieval`` line per search with ``stage_durations``, which a Logs
Insights widget aggregates.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.config import StackConfig
from stacks.constructs.alerts import alarm_name
from stacks.constructs.compute import service_name
from stacks.constructs.queues import Queues
from stacks.constructs.search import SearchBackend, SearchCollection, SearchDomain

NAMESPACE = "memstack"
RETRIEVAL_LATENCY = "RetrievalLatency"
# Dashboard-only counters: JobsSucceeded/JobsFailed from each SQS batch worker (extraction and
# consolidation), MessagesIngested from the API, ExtractionOperations from the extraction worker (one
# more dimension, "operation" = ADD/UPDATE/DELETE/NONE).
MESSAGES_INGESTED = "MessagesIngested"
EXTRACTION_OPERATIONS = "ExtractionOperations"
WORKER_JOBS = ("JobsSucceeded", "JobsFailed")
OPERATIONS = ("ADD", "UPDATE", "DELETE", "NONE")
QUEUE_AGE_LIMITS = {
    "Extraction": Duration.minutes(15),
    "Consolidation": Duration.hours(2),
    # A delivery a receiver refuses comes back as a new message (a backoff of up to 15 min each).
    "Webhooks": Duration.hours(1),
}
OPENSEARCH_CPU_PERCENT = 80
OPENSEARCH_JVM_PERCENT = 80
OPENSEARCH_FREE_STORAGE_SHARE = 0.25
AOSS_NAMESPACE = "AWS/AOSS"
#: an account's default OCU ceiling per kind (indexing, search); alarm before the collection hits it
AOSS_MAX_OCU = 10
AOSS_OCU_SHARE = 0.8
AOSS_SEARCH_LATENCY_MS = 1000


def _model_calls(prefix: str) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    return tuple((f"{prefix}{m}", ()) for m in ("InputTokens", "OutputTokens", "Calls"))


_JOBS = tuple((name, ()) for name in WORKER_JOBS)
_EXTRACTION = (*_model_calls("Extraction"), ("ExtractionFallbacks", ()))
_CONSOLIDATION = _model_calls("Consolidation")
#: Every custom metric series each function can emit (name, extra dimensions beside ``service``): what
#: CloudWatch bills per month (docs/deploy.md, scripts/cost_estimate.py). The deployed-flow test checks
#: that what the handlers really emit is listed here.
EMITTED_METRICS: dict[str, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]] = {
    # a sync=true request runs extraction or consolidation inside the API function
    "api": ((MESSAGES_INGESTED, ()), (RETRIEVAL_LATENCY, ()), *_EXTRACTION, *_CONSOLIDATION),
    "extraction_worker": (
        *_JOBS,
        *_EXTRACTION,
        *((EXTRACTION_OPERATIONS, (("operation", op),)) for op in OPERATIONS),
    ),
    "consolidation_scheduler": (("ConsolidationJobsScheduled", ()), ("StmExpiredPurged", ())),
    "consolidation_worker": (*_JOBS, *_CONSOLIDATION),
    "webhook_worker": _JOBS,
    "cost_report": (("DailyCost", ()),),
}


def retrieval_latency(config: StackConfig, statistic: str = "p95", label: str | None = None) -> cw.Metric:
    # No label on the alarm's metric: a label turns the alarm into a metric-math alarm.
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=RETRIEVAL_LATENCY,
        dimensions_map={"service": service_name(config, "api")},
        statistic=statistic,
        period=Duration.minutes(5),
        label=label,
    )


def bedrock_tokens(
    model_id: str, metric: str = "InputTokenCount", period: Duration | None = None
) -> cw.Metric:
    return cw.Metric(
        namespace="AWS/Bedrock",
        metric_name=metric,
        dimensions_map={"ModelId": model_id},
        statistic="Sum",
        period=period or Duration.hours(1),
        label=f"{metric} {model_id}",
    )


class Observability(Construct):
    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        config: StackConfig,
        topic: sns.ITopic,
        functions: dict[str, lambda_.Function],
        queues: Queues,
        search: SearchBackend | None,
    ) -> None:
        super().__init__(scope, cid)
        self._action = actions.SnsAction(topic)
        self._config = config
        self.alarms: list[cw.Alarm] = []
        self._latency_alarm(config)
        for name, fn in functions.items():
            self._alarm(
                f"{name}Errors",
                fn.metric_errors(period=Duration.minutes(5), statistic="Sum"),
                threshold=0,
                description=f"{name}: invocation errors",
            )
            self._alarm(
                f"{name}Throttles",
                fn.metric_throttles(period=Duration.minutes(5), statistic="Sum"),
                threshold=0,
                description=f"{name}: throttled invocations",
            )
        for work in queues.all():
            label = work.node.id
            self._alarm(
                f"{label}DlqDepth",
                work.dlq.metric_approximate_number_of_messages_visible(
                    period=Duration.minutes(5), statistic="Maximum"
                ),
                threshold=0,
                description=f"{label}: messages in the dead-letter queue",
            )
            limit = QUEUE_AGE_LIMITS[label]
            self._alarm(
                f"{label}QueueAge",
                work.queue.metric_approximate_age_of_oldest_message(
                    period=Duration.minutes(5), statistic="Maximum"
                ),
                threshold=limit.to_seconds(),
                evaluation_periods=2,
                description=f"{label}: oldest message older than {limit.to_minutes()} minutes",
            )
        if isinstance(search, SearchDomain):
            self._opensearch_alarms(search)
        if isinstance(search, SearchCollection):
            self._collection_alarms(search)
        self._token_alarm(config)
        self.dashboard = self._dashboard(config, functions, queues)

    def _alarm(
        self,
        cid: str,
        metric: cw.IMetric,
        *,
        threshold: float,
        description: str,
        evaluation_periods: int = 1,
        datapoints: int | None = None,
        comparison: cw.ComparisonOperator = cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    ) -> cw.Alarm:
        alarm = cw.Alarm(
            self,
            cid,
            alarm_name=alarm_name(self._config, cid),
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints or evaluation_periods,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(self._action)
        self.alarms.append(alarm)
        return alarm

    def _latency_alarm(self, config: StackConfig) -> None:
        self._alarm(
            "RetrievalLatencyP95",
            retrieval_latency(config),
            threshold=config.retrieval_latency_p95_ms,
            evaluation_periods=3,
            datapoints=2,
            description=f"retrieval latency p95 above {config.retrieval_latency_p95_ms:g} ms",
        )

    def _opensearch_alarms(self, search: SearchDomain) -> None:
        domain = search.domain
        five = Duration.minutes(5)
        self._alarm(
            "OpenSearchClusterRed",
            domain.metric_cluster_status_red(period=Duration.minutes(1), statistic="Maximum"),
            threshold=1,
            comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            description="OpenSearch cluster status red: at least one primary shard unassigned",
        )
        self._alarm(
            "OpenSearchCpu",
            domain.metric_cpu_utilization(period=five, statistic="Maximum"),
            threshold=OPENSEARCH_CPU_PERCENT,
            evaluation_periods=3,
            description=f"OpenSearch CPU above {OPENSEARCH_CPU_PERCENT}% for 15 minutes",
        )
        self._alarm(
            "OpenSearchJvmPressure",
            domain.metric_jvm_memory_pressure(period=five, statistic="Maximum"),
            threshold=OPENSEARCH_JVM_PERCENT,
            evaluation_periods=3,
            description=f"OpenSearch JVM memory pressure above {OPENSEARCH_JVM_PERCENT}%",
        )
        free_mb = search.volume_gb * 1024 * OPENSEARCH_FREE_STORAGE_SHARE
        self._alarm(
            "OpenSearchFreeStorage",
            domain.metric_free_storage_space(period=five, statistic="Minimum"),
            threshold=free_mb,
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            description=f"OpenSearch free storage below {OPENSEARCH_FREE_STORAGE_SHARE:.0%} of a node",
        )

    def _collection_alarms(self, search: SearchCollection) -> None:
        """A serverless collection's health, as the domain's: failing requests, slow search, capacity."""
        account = Stack.of(self).account
        collection = {
            "CollectionId": search.collection.attr_id,
            "CollectionName": search.name,
            "ClientId": account,
        }
        five = Duration.minutes(5)

        def metric(name: str, statistic: str, dimensions: dict[str, str]) -> cw.Metric:
            return cw.Metric(
                namespace=AOSS_NAMESPACE,
                metric_name=name,
                dimensions_map=dimensions,
                statistic=statistic,
                period=five,
            )

        for name, what in (
            ("SearchRequestErrors", "search requests failed"),
            ("IngestionRequestErrors", "indexing requests failed"),
            ("IngestionDocumentErrors", "documents were rejected"),
        ):
            self._alarm(
                f"OpenSearchCollection{name}",
                metric(name, "Sum", collection),
                threshold=0,
                description=f"OpenSearch Serverless collection {search.name}: {what}",
            )
        self._alarm(
            "OpenSearchCollectionSearchLatency",
            metric("SearchLatency", "Average", collection),
            threshold=AOSS_SEARCH_LATENCY_MS,
            evaluation_periods=3,
            description=f"OpenSearch Serverless search latency above {AOSS_SEARCH_LATENCY_MS} ms for 15 min",
        )
        ocu_limit = AOSS_MAX_OCU * AOSS_OCU_SHARE
        for name in ("SearchOCU", "IndexingOCU"):
            self._alarm(
                f"OpenSearchCollection{name}",
                metric(name, "Maximum", {"ClientId": account}),
                threshold=ocu_limit,
                comparison=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                evaluation_periods=3,
                description=f"{name} at {ocu_limit:g} of the account's default {AOSS_MAX_OCU}-OCU ceiling",
            )

    def _model_ids(self, config: StackConfig) -> list[str]:
        ids = [
            config.bedrock_extraction_model,
            config.bedrock_synthesis_model,
            config.bedrock_embedding_model,
        ]
        return list(dict.fromkeys(ids))  # unique, in order

    def _token_alarm(self, config: StackConfig) -> None:
        metrics = {f"m{i}": bedrock_tokens(m) for i, m in enumerate(self._model_ids(config))}
        total = cw.MathExpression(
            expression=f"SUM([{', '.join(metrics)}])",
            using_metrics=metrics,
            label="Bedrock input tokens per hour",
            period=Duration.hours(1),
        )
        self._alarm(
            "BedrockTokenSpike",
            total,
            threshold=config.bedrock_hourly_input_tokens,
            description=f"Bedrock input tokens above {config.bedrock_hourly_input_tokens:g} in an hour",
        )

    def _dashboard(
        self, config: StackConfig, functions: dict[str, lambda_.Function], queues: Queues
    ) -> cw.Dashboard:
        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"{config.service_name}-{config.tier}")
        latency = cw.GraphWidget(
            title="Retrieval latency (ms)",
            width=12,
            left=[retrieval_latency(config, p, label=p) for p in ("p50", "p90", "p95", "p99")],
            left_annotations=[
                cw.HorizontalAnnotation(value=config.retrieval_latency_p95_ms, label="p95 alarm")
            ],
        )
        stage_stats = ", ".join(f"pct(stage_durations.{s}, 95) as {s}" for s in config.retrieval_stages)
        stages = cw.LogQueryWidget(
            title="Retrieval stage timings, p95 (ms)",
            width=12,
            log_group_names=[functions["api"].log_group.log_group_name],
            query_lines=['filter event = "memory_retrieval"', f"stats {stage_stats} by bin(5m)"],
            view=cw.LogQueryVisualizationType.LINE,
        )
        five = Duration.minutes(5)
        counts = cw.GraphWidget(
            title="Ingested messages and extraction operations",
            width=12,
            left=[
                cw.Metric(
                    namespace=NAMESPACE,
                    metric_name=MESSAGES_INGESTED,
                    dimensions_map={"service": service_name(config, "api")},
                    statistic="Sum",
                    period=five,
                    label="messages ingested",
                ),
                *(
                    cw.Metric(
                        namespace=NAMESPACE,
                        metric_name=name,
                        dimensions_map={"service": service_name(config, worker)},
                        statistic="Sum",
                        period=five,
                        label=f"{worker.split('_')[0]} jobs: {name[4:].lower()}",
                    )
                    for worker in ("extraction_worker", "consolidation_worker")
                    for name in WORKER_JOBS
                ),
            ],
            right=[
                cw.Metric(
                    namespace=NAMESPACE,
                    metric_name=EXTRACTION_OPERATIONS,
                    dimensions_map={"service": service_name(config, "extraction_worker"), "operation": op},
                    statistic="Sum",
                    period=five,
                    label=op,
                )
                for op in OPERATIONS
            ],
        )
        tokens = cw.GraphWidget(
            title="Bedrock tokens",
            width=12,
            left=[bedrock_tokens(m, "InputTokenCount", five) for m in self._model_ids(config)],
            right=[bedrock_tokens(m, "OutputTokenCount", five) for m in self._model_ids(config)],
        )
        dlq = cw.GraphWidget(
            title="Dead-letter queues (messages)",
            width=12,
            left=[
                w.dlq.metric_approximate_number_of_messages_visible(
                    period=five, statistic="Maximum", label=w.node.id
                )
                for w in queues.all()
            ],
        )
        errors = cw.GraphWidget(
            title="Lambda errors",
            width=12,
            left=[
                fn.metric_errors(period=five, statistic="Sum", label=name) for name, fn in functions.items()
            ],
        )
        dashboard.add_widgets(latency, stages)
        dashboard.add_widgets(counts, tokens)
        dashboard.add_widgets(dlq, errors)
        return dashboard
