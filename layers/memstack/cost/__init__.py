"""The daily cost report: yesterday's spend by service for the project tag, alerting over a threshold."""

from memstack.cost.report import CostReport, run_cost_report

__all__ = ["CostReport", "run_cost_report"]
