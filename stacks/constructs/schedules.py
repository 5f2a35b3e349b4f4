"""EventBridge schedules: consolidation fan-out (rate from context, hourly by default), daily cost report."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from stacks.config import StackConfig


class Schedules(Construct):
    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        config: StackConfig,
        consolidation_scheduler: lambda_.IFunction,
        cost_report: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, cid)
        self.consolidation = events.Rule(
            self,
            "Consolidation",
            description="fan out consolidation to every user with pending short-term memory",
            schedule=events.Schedule.rate(Duration.minutes(config.consolidation_rate_minutes)),
            targets=[
                targets.LambdaFunction(
                    consolidation_scheduler,
                    retry_attempts=2,
                    max_event_age=Duration.minutes(30),
                )
            ],
        )
        self.cost_report = events.Rule(
            self,
            "CostReport",
            description="yesterday's cost by service, published to the alert topic over the threshold",
            schedule=events.Schedule.expression(config.cost_report_schedule),
            targets=[targets.LambdaFunction(cost_report, retry_attempts=2, max_event_age=Duration.hours(6))],
        )
