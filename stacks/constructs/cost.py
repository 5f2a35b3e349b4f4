"""Cost guard rails: a monthly budget and Cost Anomaly Detection on this tier's spend alone.

Both filter on ``Project=<service_name>`` AND ``Tier=<tier>`` (the tags the
stack puts on every resource, memstack.cost.tags), so two tiers in one
account each see only their own spend. Both notify the alert topic. The two
tags must be activated once as cost allocation tags in the Billing console
(docs/deploy.md) before either sees any spend.
"""

from __future__ import annotations

import json

from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_ce as ce
from aws_cdk import aws_sns as sns
from constructs import Construct
from memstack.cost.tags import cost_explorer_filter, tag_values

from stacks.config import StackConfig

# (notification type, percent of the budget)
BUDGET_NOTIFICATIONS = (("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100))


def budget_filter(config: StackConfig) -> budgets.CfnBudget.ExpressionProperty:
    """Budgets' own expression type: user-defined tag keys carry the ``user:`` prefix there."""
    return budgets.CfnBudget.ExpressionProperty(
        and_=[
            budgets.CfnBudget.ExpressionProperty(
                tags=budgets.CfnBudget.TagValuesProperty(
                    key=f"user:{key}", values=[value], match_options=["EQUALS"]
                )
            )
            for key, value in tag_values(config.service_name, config.tier).items()
        ]
    )


class CostControls(Construct):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig, topic: sns.ITopic) -> None:
        super().__init__(scope, cid)
        subscriber = budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn)
        self.budget = budgets.CfnBudget(
            self,
            "MonthlyBudget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{config.service_name}-{config.tier}-monthly",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=config.monthly_budget, unit="USD"),
                filter_expression=budget_filter(config),
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type=kind,
                        comparison_operator="GREATER_THAN",
                        threshold=percent,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=[subscriber],
                )
                for kind, percent in BUDGET_NOTIFICATIONS
            ],
        )
        # A CUSTOM monitor on the tags (an account has room for only one DIMENSIONAL/SERVICE monitor).
        self.anomaly_monitor = ce.CfnAnomalyMonitor(
            self,
            "AnomalyMonitor",
            monitor_name=f"{config.service_name}-{config.tier}",
            monitor_type="CUSTOM",
            monitor_specification=json.dumps(cost_explorer_filter(config.service_name, config.tier)),
        )
        self.anomaly_subscription = ce.CfnAnomalySubscription(
            self,
            "AnomalySubscription",
            subscription_name=f"{config.service_name}-{config.tier}-anomalies",
            frequency="IMMEDIATE",  # the only frequency that can notify SNS
            monitor_arn_list=[self.anomaly_monitor.attr_monitor_arn],
            subscribers=[ce.CfnAnomalySubscription.SubscriberProperty(type="SNS", address=topic.topic_arn)],
            threshold_expression=json.dumps(
                {
                    "Dimensions": {
                        "Key": "ANOMALY_TOTAL_IMPACT_ABSOLUTE",
                        "MatchOptions": ["GREATER_THAN_OR_EQUAL"],
                        "Values": [str(config.cost_anomaly_threshold)],
                    }
                }
            ),
        )
