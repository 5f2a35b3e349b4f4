"""The alert topic every alarm, budget and cost report publishes to.

Encrypted with a customer-managed key because the AWS-managed SNS key
cannot be used by CloudWatch, Budgets or Cost Anomaly Detection: their
service principals are allowed to use this key and publish to the topic.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct

from stacks.config import StackConfig

# Services that publish alerts to the topic on our behalf.
PUBLISHING_SERVICES = ("cloudwatch.amazonaws.com", "budgets.amazonaws.com", "costalerts.amazonaws.com")


def alarm_name(config: StackConfig, purpose: str) -> str:
    """The alarm's name in the console: ``<service>-<tier>-<purpose>``, the purpose as docs/operations.md
    lists it (a generated name would not say which runbook entry to open)."""
    return f"{config.service_name}-{config.tier}-{purpose}"


class AlertTopic(Construct):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig) -> None:
        super().__init__(scope, cid)
        self.key = kms.Key(
            self,
            "Key",
            description="memstack alert topic encryption",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        services = [iam.ServicePrincipal(s) for s in PUBLISHING_SERVICES]
        # Confused-deputy guard: only these services acting for this account.
        same_account = {"StringEquals": {"aws:SourceAccount": Stack.of(self).account}}
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowAlertPublishers",
                principals=services,
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy "*" means this key
                conditions=same_account,
            )
        )
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=f"{config.service_name} alerts ({config.tier})",
            master_key=self.key,
            enforce_ssl=True,
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowAlertPublishers",
                principals=services,
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=same_account,
            )
        )
        if config.alert_email:
            self.topic.add_subscription(subs.EmailSubscription(config.alert_email))
