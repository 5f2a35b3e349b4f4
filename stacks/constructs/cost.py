"""Cost guard rails: a monthly budget on the project tag, and Cost Anomaly Detection.

Both notify the alert topic. The project tag (``Project=<service_name>``)
must be activated once as a cost allocation tag in the Billing console
(docs/deploy.md) before either sees any spend.
"""

from __future__ import annotations

import json

from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_ce as ce
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.config import StackConfig

# (notification type, percent of the budget)
BUDGET_NOTIFICATIONS = (("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100))


class CostControls(Construct):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig, topic: sns.ITopic) -> None:
        super().__init__(scope, cid)
        tag = config.service_name
        subscriber = budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn)
        self.budget = budgets.CfnBudget(
            self,
            "MonthlyBudget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{config.service_name}-{config.tier}-monthly",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=config.monthly_budget, unit="USD"),
                cost_filters={"TagKeyValue": [f"user:Project${tag}"]},
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
        # A CUSTOM monitor on the project tag (an account has room for only one DIMENSIONAL/SERVICE monitor).
        self.anomaly_monitor = ce.CfnAnomalyMonitor(
            self,
            "AnomalyMonitor",
            monitor_name=f"{config.service_name}-{config.tier}",
            monitor_type="CUSTOM",
            monitor_specification=json.dumps({"Tags": {"Key": "Project", "Values": [tag]}}),
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
