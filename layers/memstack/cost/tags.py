"""The cost allocation tags every memstack resource carries, and the Cost Explorer filter on them.

The stack tags everything ``Project=<service_name>`` and ``Tier=<tier>``
(stacks/memstack_stack.py uses these keys); the budget, the anomaly monitor
and the daily cost report all filter on BOTH, so two tiers deployed in one
account never count each other's spend.
"""

from __future__ import annotations

from typing import Any

PROJECT_TAG_KEY = "Project"
TIER_TAG_KEY = "Tier"


def tag_values(project: str, tier: str | None) -> dict[str, str]:
    """The tags to filter on, in a fixed order (the tier only when there is one)."""
    tags = {PROJECT_TAG_KEY: project}
    if tier:
        tags[TIER_TAG_KEY] = tier
    return tags


def cost_explorer_filter(project: str, tier: str | None) -> dict[str, Any]:
    """A Cost Explorer ``Expression`` matching resources that carry every one of the tags.

    Cost Explorer wants ``And`` to hold at least two expressions, so one tag is a bare ``Tags``.
    The same shape is an anomaly monitor's ``MonitorSpecification``.
    """
    clauses = [
        {"Tags": {"Key": key, "Values": [value], "MatchOptions": ["EQUALS"]}}
        for key, value in tag_values(project, tier).items()
    ]
    return clauses[0] if len(clauses) == 1 else {"And": clauses}
