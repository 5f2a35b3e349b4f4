"""The five memstack functions, their configuration and exactly the access each one needs.

Configuration reaches the functions only as ``MEMSTACK_*`` environment
variables (the names in layers/memstack/settings.py) plus POWERTOOLS_*.
Access is granted with CDK's ``grant_*`` helpers; Bedrock on the exact model
ARNs (stacks/constructs/bedrock.py). The queue consumers have a maximum
concurrency so a burst of messages cannot flood Bedrock's quotas.
"""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.config import StackConfig
from stacks.constructs import bedrock
from stacks.constructs.aurora import MemoryDatabase
from stacks.constructs.functions import StandardFunction, memstack_layer
from stacks.constructs.queues import CONSOLIDATION_WORKER_TIMEOUT, EXTRACTION_WORKER_TIMEOUT, Queues
from stacks.constructs.search import SearchBackend
from stacks.constructs.storage import Storage

API_TIMEOUT = Duration.seconds(29)  # API Gateway's integration limit
SCHEDULER_TIMEOUT = Duration.minutes(5)
COST_REPORT_TIMEOUT = Duration.minutes(1)


def memstack_environment(
    config: StackConfig,
    scope: Construct,
    storage: Storage,
    queues: Queues,
    search: SearchBackend | None,
    topic: sns.ITopic,
    database: MemoryDatabase | None = None,
) -> dict[str, str]:
    env = {
        "MEMSTACK_STORE_BACKEND": config.store_backend,
        "MEMSTACK_STM_BACKEND": "dynamodb",
        "MEMSTACK_QUEUE_BACKEND": "sqs",
        "MEMSTACK_EMBEDDER": "bedrock-titan",
        "MEMSTACK_LLM": "bedrock",
        "MEMSTACK_RERANKER": config.reranker,
        "MEMSTACK_EMBEDDING_DIM": str(config.embedding_dim),
        "MEMSTACK_COARSE_DIM": str(config.coarse_dim),
        # Lambda's only writable path, should anything fall back to local files.
        "MEMSTACK_DATA_DIR": "/tmp/memstack",
        "MEMSTACK_AWS_REGION": Stack.of(scope).region,
        "MEMSTACK_STM_TABLE": storage.stm_table.table_name,
        "MEMSTACK_IDEMPOTENCY_TABLE": storage.idempotency_table.table_name,
        "MEMSTACK_EXTRACTION_QUEUE_URL": queues.extraction.queue.queue_url,
        "MEMSTACK_CONSOLIDATION_QUEUE_URL": queues.consolidation.queue.queue_url,
        "MEMSTACK_BEDROCK_EXTRACTION_MODEL": config.bedrock_extraction_model,
        "MEMSTACK_BEDROCK_SYNTHESIS_MODEL": config.bedrock_synthesis_model,
        "MEMSTACK_BEDROCK_EMBEDDING_MODEL": config.bedrock_embedding_model,
        "MEMSTACK_ALERT_TOPIC_ARN": topic.topic_arn,
        "MEMSTACK_COST_REPORT_THRESHOLD": str(config.cost_report_threshold),
        "MEMSTACK_PROJECT_TAG": config.service_name,
    }
    if config.bedrock_rerank_model_arn:
        env["MEMSTACK_BEDROCK_RERANK_MODEL_ARN"] = config.bedrock_rerank_model_arn
    if storage.memories_table is not None:
        env["MEMSTACK_MEMORIES_TABLE"] = storage.memories_table.table_name
    if search is not None:
        env["MEMSTACK_OPENSEARCH_ENDPOINT"] = search.endpoint
        env["MEMSTACK_OPENSEARCH_SERVICE"] = search.service
    if database is not None:
        env.update(database.environment())
    return env


class Compute(Construct):
    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        config: StackConfig,
        storage: Storage,
        queues: Queues,
        search: SearchBackend | None,
        topic: sns.ITopic,
        database: MemoryDatabase | None = None,
    ) -> None:
        super().__init__(scope, cid)
        self.layer = memstack_layer(self, "Layer", config)
        env = memstack_environment(config, self, storage, queues, search, topic, database)

        def make(
            cid: str, handler_dir: str, short: str, memory: int, timeout: Duration, description: str
        ) -> lambda_.Function:
            fn = StandardFunction(
                self,
                cid,
                config=config,
                handler_dir=handler_dir,
                layer=self.layer,
                memory_mb=memory,
                timeout=timeout,
                description=description,
                environment={**env, "POWERTOOLS_SERVICE_NAME": f"{config.service_name}-{short}"},
            ).function
            return fn

        self.api = make(
            "Api",
            "api",
            "api",
            config.api_memory_mb,
            API_TIMEOUT,
            "memstack REST API: ingest, search, memories, consolidations",
        )
        self.extraction_worker = make(
            "ExtractionWorker",
            "extraction_worker",
            "extraction",
            config.worker_memory_mb,
            EXTRACTION_WORKER_TIMEOUT,
            "memstack extraction: STM message -> LTM operations",
        )
        self.consolidation_scheduler = make(
            "ConsolidationScheduler",
            "consolidation_scheduler",
            "scheduler",
            512,
            SCHEDULER_TIMEOUT,
            "memstack consolidation fan-out: one message per user with pending STM",
        )
        self.consolidation_worker = make(
            "ConsolidationWorker",
            "consolidation_worker",
            "consolidation",
            config.worker_memory_mb,
            CONSOLIDATION_WORKER_TIMEOUT,
            "memstack consolidation: summarise and synthesise one user's STM",
        )
        self.cost_report = make(
            "CostReport",
            "cost_report",
            "cost",
            256,
            COST_REPORT_TIMEOUT,
            "memstack daily cost report by service",
        )

        self._grant_data(config, storage, queues, search, topic)
        if database is not None:
            for fn in self.data_plane():
                database.grant_data_api(fn)
        self._grant_models(config)
        self.extraction_worker.add_event_source(
            sources.SqsEventSource(
                queues.extraction.queue,
                batch_size=10,
                max_batching_window=Duration.seconds(5),
                max_concurrency=config.extraction_max_concurrency,
                report_batch_item_failures=True,
            )
        )
        self.consolidation_worker.add_event_source(
            sources.SqsEventSource(
                queues.consolidation.queue,
                batch_size=1,
                max_concurrency=config.consolidation_max_concurrency,
                report_batch_item_failures=True,
            )
        )

    def all(self) -> dict[str, lambda_.Function]:
        return {
            "api": self.api,
            "extraction_worker": self.extraction_worker,
            "consolidation_scheduler": self.consolidation_scheduler,
            "consolidation_worker": self.consolidation_worker,
            "cost_report": self.cost_report,
        }

    def data_plane(self) -> list[lambda_.Function]:
        """The functions that read and write memories."""
        return [self.api, self.extraction_worker, self.consolidation_worker]

    def _grant_data(
        self,
        config: StackConfig,
        storage: Storage,
        queues: Queues,
        search: SearchBackend | None,
        topic: sns.ITopic,
    ) -> None:
        for fn in self.data_plane():
            for table in storage.data_tables():
                table.grant_read_write_data(fn)
            if search is not None:
                search.grant_read_write(fn)
        # The API enqueues extraction jobs on ingest and consolidation jobs on request.
        queues.extraction.queue.grant_send_messages(self.api)
        queues.consolidation.queue.grant_send_messages(self.api)
        # The scheduler purges expired STM, finds users with pending STM (sparse index) and fans out
        # one message per user.
        storage.stm_table.grant_read_write_data(self.consolidation_scheduler)
        queues.consolidation.queue.grant_send_messages(self.consolidation_scheduler)
        # Cost report: Cost Explorer has no resource-level permissions, so "*" is the only option.
        self.cost_report.add_to_role_policy(
            iam.PolicyStatement(
                actions=["ce:GetCostAndUsage"],
                resources=["*"],
            )
        )
        topic.grant_publish(self.cost_report)

    def _grant_models(self, config: StackConfig) -> None:
        llms = [config.bedrock_extraction_model, config.bedrock_synthesis_model]
        embed = [config.bedrock_embedding_model]
        # The API embeds queries, reranks, and may run a synchronous consolidation.
        bedrock.grant_invoke(self, self.api, embed + llms)
        bedrock.grant_rerank(self, self.api, config.bedrock_rerank_model_arn)
        bedrock.grant_invoke(self, self.extraction_worker, [*embed, config.bedrock_extraction_model])
        bedrock.grant_invoke(self, self.consolidation_worker, embed + llms)
