"""The five memstack functions, their configuration and exactly the access each one needs.

Configuration reaches the functions only as ``MEMSTACK_*`` environment
variables (the names in layers/memstack/settings.py) plus POWERTOOLS_*.
Access is granted with CDK's ``grant_*`` helpers; Bedrock on the exact model
ARNs (stacks/constructs/bedrock.py). The queue consumers have a maximum
concurrency so a burst of messages cannot flood Bedrock's quotas.
"""

from __future__ import annotations

from aws_cdk import CustomResource, Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.config import StackConfig
from stacks.constructs import bedrock
from stacks.constructs.aurora import MemoryDatabase
from stacks.constructs.environment import deployment_settings, function_environment, function_reads
from stacks.constructs.functions import StandardFunction, memstack_layer
from stacks.constructs.queues import (
    CONSOLIDATION_WORKER_TIMEOUT,
    EXTRACTION_WORKER_TIMEOUT,
    WEBHOOK_WORKER_TIMEOUT,
    Queues,
)
from stacks.constructs.search import SearchBackend
from stacks.constructs.storage import Storage

# Below API Gateway's 29 s integration limit, so the function answers (or fails) before the gateway
# gives up with a bare 504; synchronous work inside a request stops at SYNC_BUDGET and answers "queued".
API_TIMEOUT = Duration.seconds(26)
SYNC_BUDGET = Duration.seconds(20)
SCHEDULER_TIMEOUT = Duration.minutes(5)
# A paused Aurora cluster takes up to ~15 s to resume; the migrations themselves take seconds.
MIGRATION_TIMEOUT = Duration.minutes(5)
# The backfill scans the memories table once; it stops in time to answer (then `memstack migrate`).
DIRECTORY_BACKFILL_TIMEOUT = Duration.minutes(14)
#: raise to make the next deploy run the directory backfill again
DIRECTORY_BACKFILL_LEVEL = 1
COST_REPORT_TIMEOUT = Duration.minutes(1)
#: each function's Powertools service name is <service_name>-<suffix>; alarms and dashboard read the same
SERVICE_SUFFIX = {
    "api": "api",
    "extraction_worker": "extraction",
    "consolidation_scheduler": "scheduler",
    "consolidation_worker": "consolidation",
    "webhook_worker": "webhooks",
    "cost_report": "cost",
    "schema_migration": "migrate",
}


def service_name(config: StackConfig, function: str) -> str:
    return f"{config.service_name}-{SERVICE_SUFFIX[function]}"


def stack_resources(
    scope: Construct,
    storage: Storage,
    queues: Queues,
    search: SearchBackend | None,
    topic: sns.ITopic,
    database: MemoryDatabase | None = None,
) -> dict[str, str]:
    """The settings whose values are this stack's own resources (tokens until deploy)."""
    resources = {
        "aws_region": Stack.of(scope).region,
        "stm_table": storage.stm_table.table_name,
        "idempotency_table": storage.idempotency_table.table_name,
        "extraction_queue_url": queues.extraction.queue.queue_url,
        "consolidation_queue_url": queues.consolidation.queue.queue_url,
        "extraction_dlq_url": queues.extraction.dlq.queue_url,
        "consolidation_dlq_url": queues.consolidation.dlq.queue_url,
        "webhook_queue_url": queues.webhooks.queue.queue_url,
        "webhook_dlq_url": queues.webhooks.dlq.queue_url,
        "alert_topic_arn": topic.topic_arn,
        "cursor_secret_arn": storage.cursor_secret.secret_arn,
        "sync_timeout_seconds": str(SYNC_BUDGET.to_seconds()),
    }
    if storage.memories_table is not None:
        resources["memories_table"] = storage.memories_table.table_name
    if storage.snapshot_bucket is not None:
        resources["snapshot_bucket"] = storage.snapshot_bucket.bucket_name
    if search is not None:
        resources["opensearch_endpoint"] = search.endpoint
        resources["opensearch_service"] = search.service
    if database is not None:
        resources.update(database.settings())
    return resources


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
        self.settings = deployment_settings(
            config, stack_resources(self, storage, queues, search, topic, database)
        )

        def make(
            cid: str, handler_dir: str, memory: int, timeout: Duration, description: str
        ) -> lambda_.Function:
            env = function_environment(self.settings, function_reads(config, handler_dir))
            fn = StandardFunction(
                self,
                cid,
                config=config,
                handler_dir=handler_dir,
                layer=self.layer,
                memory_mb=memory,
                timeout=timeout,
                description=description,
                environment={**env, "POWERTOOLS_SERVICE_NAME": service_name(config, handler_dir)},
            ).function
            return fn

        self.api = make(
            "Api",
            "api",
            config.api_memory_mb,
            API_TIMEOUT,
            "memstack REST API: ingest, search, memories, consolidations",
        )
        self.extraction_worker = make(
            "ExtractionWorker",
            "extraction_worker",
            config.worker_memory_mb,
            EXTRACTION_WORKER_TIMEOUT,
            "memstack extraction: STM message -> LTM operations",
        )
        self.consolidation_scheduler = make(
            "ConsolidationScheduler",
            "consolidation_scheduler",
            512,
            SCHEDULER_TIMEOUT,
            "memstack consolidation fan-out: one message per user with pending STM",
        )
        self.consolidation_worker = make(
            "ConsolidationWorker",
            "consolidation_worker",
            config.worker_memory_mb,
            CONSOLIDATION_WORKER_TIMEOUT,
            "memstack consolidation: summarise and synthesise one user's STM",
        )
        self.webhook_worker = make(
            "WebhookWorker",
            "webhook_worker",
            config.worker_memory_mb,
            WEBHOOK_WORKER_TIMEOUT,
            "memstack webhooks: sign and deliver tenants' events to their receivers",
        )
        self.cost_report = make(
            "CostReport",
            "cost_report",
            256,
            COST_REPORT_TIMEOUT,
            "memstack daily cost report by service",
        )

        self._grant_data(config, storage, queues, search, topic)
        self.schema_migration: lambda_.Function | None = None
        if database is not None:
            # The functions that read and write memories; the scheduler only reads STM and sends jobs
            # (its store is never opened: migrations run at deploy time, below).
            for fn in self.data_plane():
                database.grant_data_api(fn)
            self.schema_migration = make(
                "SchemaMigration",
                "schema_migration",
                256,
                MIGRATION_TIMEOUT,
                "memstack deploy-time PostgreSQL schema migrations (CloudFormation custom resource)",
            )
            database.grant_data_api(self.schema_migration)
            self._migrate_at_deploy(database, self.schema_migration)
        elif storage.memories_table is not None:
            # The same function, on the dynamodb store: the user directory backfill at deploy time.
            self.schema_migration = make(
                "SchemaMigration",
                "schema_migration",
                256,
                DIRECTORY_BACKFILL_TIMEOUT,
                "memstack deploy-time user directory backfill (CloudFormation custom resource)",
            )
            self._backfill_at_deploy(storage.memories_table, self.schema_migration)
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
        self._webhooks(storage, queues, search, database)

    def _webhooks(
        self,
        storage: Storage,
        queues: Queues,
        search: SearchBackend | None,
        database: MemoryDatabase | None,
    ) -> None:
        """Tenants' events: queued where memories are written and jobs fail, delivered by their worker.

        The worker reads the tenant's configuration (beside the memories: the table, the search
        backend or the database) and the erasure log (the STM table); its job records are the
        idempotency table's. It sends a refused delivery back to its own queue with a delay.
        """
        fn = self.webhook_worker
        for writer in (self.api, self.extraction_worker, self.consolidation_worker):
            queues.webhooks.queue.grant_send_messages(writer)
        queues.webhooks.queue.grant_send_messages(fn)
        for table in storage.data_tables():
            table.grant_read_data(fn)
        storage.idempotency_table.grant_read_write_data(fn)
        if search is not None:
            search.grant_read_write(fn)
        if database is not None:
            database.grant_data_api(fn)
        fn.add_event_source(
            sources.SqsEventSource(
                queues.webhooks.queue,
                batch_size=10,
                max_batching_window=Duration.seconds(1),
                max_concurrency=2,
                report_batch_item_failures=True,
            )
        )

    def _migrate_at_deploy(self, database: MemoryDatabase, fn: lambda_.Function) -> None:
        """The custom resource CloudFormation sends Create/Update to: the schema is migrated before traffic.

        Its properties change when a migration is added or the coarse dimension changes, so a
        deploy that brings either runs the migrations again; the cluster is up before it runs.
        """
        from memstack.adapters.postgres.schema import LATEST

        resource = CustomResource(
            self,
            "Schema",
            service_token=fn.function_arn,
            resource_type="Custom::MemstackSchema",
            properties={
                "Schema": self.settings.postgres.schema_name,
                "CoarseDim": str(self.settings.embedding.coarse_dim),
                "Migrations": str(LATEST),
            },
        )
        resource.node.add_dependency(database.cluster)

    def _backfill_at_deploy(self, table: dynamodb.ITable, fn: lambda_.Function) -> None:
        """The custom resource that writes the user directory entries a table from before it lacks.

        Created with the resource (the deploy that brings the directory to an older stack), again
        when ``DIRECTORY_BACKFILL_LEVEL`` rises. Exactly the access the backfill makes: it scans the
        memory items, reads META, entries and partitions, and puts entries under conditions.
        """
        table.grant(
            fn,
            "dynamodb:Scan",
            "dynamodb:Query",
            "dynamodb:GetItem",
            "dynamodb:ConditionCheckItem",
            "dynamodb:PutItem",
        )
        CustomResource(
            self,
            "UserDirectory",
            service_token=fn.function_arn,
            resource_type="Custom::MemstackUserDirectory",
            properties={"Table": table.table_name, "Backfill": str(DIRECTORY_BACKFILL_LEVEL)},
        )

    def all(self) -> dict[str, lambda_.Function]:
        return {
            "api": self.api,
            "extraction_worker": self.extraction_worker,
            "consolidation_scheduler": self.consolidation_scheduler,
            "consolidation_worker": self.consolidation_worker,
            "webhook_worker": self.webhook_worker,
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
            storage.grant_snapshots(fn)
        # The API signs and checks list cursors with the deployment's key.
        storage.cursor_secret.grant_read(self.api)
        # The API enqueues extraction jobs on ingest and consolidation jobs on request.
        queues.extraction.queue.grant_send_messages(self.api)
        queues.consolidation.queue.grant_send_messages(self.api)
        # DELETE /v1/users/{id} removes the user's dead-lettered jobs: it receives both DLQs, deletes
        # the user's messages and makes the others visible again (SqsJobQueue.erase_user).
        for work in queues.all():
            work.dlq.grant_consume_messages(self.api)
        # The scheduler purges expired STM, finds users with pending STM (sparse index) and fans out
        # one message per user.
        storage.stm_table.grant_read_write_data(self.consolidation_scheduler)
        queues.consolidation.queue.grant_send_messages(self.consolidation_scheduler)
        # ... and re-enqueues extraction owed to messages whose enqueue was lost (the outbox sweep).
        queues.extraction.queue.grant_send_messages(self.consolidation_scheduler)
        # A worker defers a throttled job by sending it back to its own queue with a delay
        # (adapters/queue/sqs_backoff.py), so throttling never spends the job's receives.
        queues.extraction.queue.grant_send_messages(self.extraction_worker)
        queues.consolidation.queue.grant_send_messages(self.consolidation_worker)
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
