"""``memstack cost-report``: the daily cost report, run by hand (same logic as the Lambda)."""

from __future__ import annotations

from typing import Annotated

import typer

from memstack.cli.app import console, err_console, print_json, settings_from_cli
from memstack.cost.report import run_cost_report
from memstack.cost.sinks import cloudwatch_sink

CE_REGION = "us-east-1"  # Cost Explorer's only endpoint


def cost_report(
    as_json: Annotated[bool, typer.Option("--json", help="print the report as JSON")] = False,
    publish: Annotated[
        bool, typer.Option(help="publish to MEMSTACK_ALERT_TOPIC_ARN when over the threshold")
    ] = True,
    metric: Annotated[bool, typer.Option(help="record the total as the DailyCost CloudWatch metric")] = True,
    threshold: Annotated[float | None, typer.Option(help="override MEMSTACK_COST_REPORT_THRESHOLD")] = None,
) -> None:
    """Yesterday's AWS cost by service for the project tag (needs AWS credentials)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    settings = settings_from_cli(cost_report_threshold=threshold)
    try:
        report = run_cost_report(
            settings,
            ce_client=boto3.client("ce", region_name=CE_REGION),
            sns_client=boto3.client("sns", region_name=settings.aws.aws_region)
            if settings.cost.alert_topic_arn
            else None,
            record_metric=cloudwatch_sink(boto3.client("cloudwatch", region_name=settings.aws.aws_region))
            if metric
            else None,
            publish=publish,
        )
    except (BotoCoreError, ClientError) as exc:
        err_console.print(f"[red]error:[/red] AWS call failed: {exc}", highlight=False)
        raise typer.Exit(1) from None
    result = report.to_dict()
    if as_json:
        print_json(result)
        return
    console.print(
        f"{report.project_tag} on {result['date']}: [bold]{report.total:.2f} {report.currency}[/bold]"
        f" (threshold {report.threshold:.2f})"
    )
    for service, amount in report.by_service.items():
        console.print(f"  {service}: {amount:.2f}")
    if report.published:
        console.print(f"published to the alert topic (message {report.message_id})")
    elif report.skipped_reason:
        console.print(f"not published: {report.skipped_reason}")


def register(app: typer.Typer) -> None:
    app.command("cost-report")(cost_report)
