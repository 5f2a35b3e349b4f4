"""``MemstackStack``: everything ``cdk deploy`` provisions for one tier, composed of capability constructs."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import App, CfnOutput, Stack, Tags, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import Construct
from memstack.cost.tags import tag_values

from stacks.config import ROOT, StackConfig
from stacks.constructs.alerts import AlertTopic
from stacks.constructs.api import Api
from stacks.constructs.aurora import MemoryDatabase
from stacks.constructs.compute import Compute
from stacks.constructs.cost import CostControls
from stacks.constructs.observability import Observability
from stacks.constructs.queues import Queues
from stacks.constructs.schedules import Schedules
from stacks.constructs.search import build_search
from stacks.constructs.storage import Storage
from stacks.nag import acknowledge_findings


class MemstackStack(Stack):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig, **kwargs: Any) -> None:
        super().__init__(
            scope, cid, description=f"memstack long-term memory service ({config.tier} tier)", **kwargs
        )
        self.config = config
        self.storage = Storage(self, "Storage", config=config)
        self.search = build_search(self, "Search", config)
        self.queues = Queues(self, "Queues")
        self.alerts = AlertTopic(self, "Alerts", config=config)
        self.database = (
            MemoryDatabase(self, "Database", config=config, topic=self.alerts.topic)
            if config.uses_postgres
            else None
        )
        self.compute = Compute(
            self,
            "Compute",
            config=config,
            storage=self.storage,
            queues=self.queues,
            search=self.search,
            topic=self.alerts.topic,
            database=self.database,
        )
        if self.search is not None:
            self.search.finish()
        self.api = Api(self, "Api", config=config, handler=self.compute.api)
        self.schedules = Schedules(
            self,
            "Schedules",
            config=config,
            consolidation_scheduler=self.compute.consolidation_scheduler,
            cost_report=self.compute.cost_report,
        )
        self.observability = Observability(
            self,
            "Observability",
            config=config,
            topic=self.alerts.topic,
            functions=self.compute.all(),
            queues=self.queues,
            search=self.search,
        )
        if self.database is not None:
            self.observability.dashboard.add_widgets(*self.database.widgets())
        self.cost = CostControls(self, "Cost", config=config, topic=self.alerts.topic)

        for key, value in tag_values(config.service_name, config.tier).items():
            Tags.of(self).add(key, value)
        CfnOutput(self, "ApiUrl", value=self.api.url)
        CfnOutput(self, "AlertTopicArn", value=self.alerts.topic.topic_arn)
        CfnOutput(self, "StmTableName", value=self.storage.stm_table.table_name)
        if self.storage.memories_table is not None:
            CfnOutput(self, "MemoriesTableName", value=self.storage.memories_table.table_name)
        CfnOutput(self, "ApiFunctionName", value=self.compute.api.function_name)
        for work in self.queues.all():
            CfnOutput(self, f"{work.node.id}QueueUrl", value=work.queue.queue_url)
            CfnOutput(self, f"{work.node.id}DlqUrl", value=work.dlq.queue_url)
        if self.search is not None:
            CfnOutput(self, "OpenSearchEndpoint", value=self.search.endpoint)
        if self.database is not None:
            CfnOutput(self, "AuroraClusterArn", value=self.database.cluster.cluster_arn)
            CfnOutput(self, "AuroraSecretArn", value=self.database.secret.secret_arn)
        acknowledge_findings(self)


def stack_name(config: StackConfig) -> str:
    return f"{config.service_name}-{config.tier}"


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's context: the CLI passes it in, but tests and ``python app.py`` need it too."""
    return dict(json.loads((ROOT / "cdk.json").read_text()).get("context", {}))


def create_app(context: dict[str, Any] | None = None, outdir: str | None = None) -> tuple[App, MemstackStack]:
    """The CDK app with cdk-nag's AWS Solutions checks.

    ``context`` overrides cdk.json's; ``cdk -c`` on the command line overrides both.
    """
    app = App(context={**cdk_json_context(), **(context or {})}, outdir=outdir)
    config = StackConfig.from_context(app.node)
    stack = MemstackStack(app, "Memstack", stack_name=stack_name(config), config=config)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack
