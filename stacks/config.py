"""The deployment configuration: ``cdk.json`` context, the tier's defaults, and ``-c`` overrides, typed once.

Every construct receives a ``StackConfig`` instead of reading context itself,
so the values and their types live in one place. Lookup order for a tier
value: ``-c name=value`` on the command line, then ``tiers.<tier>.<name>`` in
``cdk.json``, then the default here. ``-c`` values arrive as strings and are
converted to the field's type.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_type_hints

from constructs import Node
from memstack.adapters.embedders.bedrock import prefix_is_meaningful

TIERS = ("small", "medium", "large")
STORE_BACKENDS = ("dynamodb", "opensearch", "postgres")
ROOT = Path(__file__).resolve().parent.parent


class ConfigError(ValueError):
    """A context value is missing or malformed: synth stops with this message."""


@dataclass(frozen=True)
class StackConfig:
    tier: str = "small"
    service_name: str = "memstack"
    log_level: str = "INFO"
    log_retention_days: int = 30
    alert_email: str = ""
    cognito_user_pool_arn: str = ""
    # the memory browser's sign-in: an app client of that pool (no secret, USER_PASSWORD_AUTH; docs/ui.md)
    cognito_ui_client_id: str = ""
    api_key_required: bool = False
    # the account-wide API Gateway CloudWatch role: none | existing | create (stacks/constructs/api.py)
    api_gateway_logging_role: str = "none"
    # where the built layer and the handlers live (tests point these elsewhere)
    layer_dir: str = str(ROOT / "build" / "layer")
    lambdas_dir: str = str(ROOT / "lambdas")

    # schedules, thresholds
    consolidation_rate_minutes: int = 60
    cost_report_schedule: str = "cron(0 6 * * ? *)"
    cost_report_threshold: float = 10.0
    cost_anomaly_threshold: float = 10.0
    monthly_budget: float = 30.0
    retrieval_latency_p95_ms: float = 500.0
    bedrock_hourly_input_tokens: float = 2_000_000.0
    retrieval_stages: tuple[str, ...] = (
        "query_analysis",
        "vector",
        "bm25",
        "fusion",
        "temporal",
        "dedup",
        "rerank",
        "history",
        "total",
    )

    # models
    bedrock_extraction_model: str = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    bedrock_synthesis_model: str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    bedrock_embedding_model: str = "amazon.titan-embed-text-v2:0"
    bedrock_rerank_model_arn: str = ""
    embedding_dim: int = 1024
    coarse_dim: int = 1024

    # memstack settings for the functions beyond what the fields here decide: {"rrf_k": 5, ...}
    # (names are layers/memstack/settings.py fields; stacks/constructs/environment.py)
    settings: dict[str, Any] = field(default_factory=dict)

    # per tier
    store_backend: str = "dynamodb"
    api_rate_limit: float = 10.0
    api_burst_limit: int = 20
    api_monthly_quota: int = 100_000
    extraction_max_concurrency: int = 2
    consolidation_max_concurrency: int = 2
    api_memory_mb: int = 1024
    worker_memory_mb: int = 1024
    opensearch_serverless: bool = False
    opensearch_data_nodes: int = 2
    opensearch_zones: int = 2
    opensearch_instance_type: str = "m7g.large.search"
    opensearch_volume_gb: int = 50
    opensearch_master_nodes: int = 0
    opensearch_master_instance_type: str = "m7g.large.search"
    # store_backend=postgres: Aurora PostgreSQL Serverless v2 (stacks/constructs/aurora.py)
    aurora_min_acu: float = 0.0
    aurora_max_acu: float = 4.0
    aurora_auto_pause_minutes: int = 10
    aurora_backup_days: int = 7
    aurora_deletion_protection: bool = True
    aurora_secret_rotation: bool = False
    aurora_connections_alarm: int = 400
    # IAM roles of operators who reindex (memstack opensearch reindex): mapped to memstack_maintenance
    opensearch_maintenance_role_arns: tuple[str, ...] = ()

    @property
    def uses_opensearch(self) -> bool:
        return self.store_backend == "opensearch"

    @property
    def uses_postgres(self) -> bool:
        return self.store_backend == "postgres"

    @property
    def reranker(self) -> str:
        return "bedrock" if self.bedrock_rerank_model_arn else "none"

    @classmethod
    def from_context(cls, node: Node) -> StackConfig:
        tier = str(node.try_get_context("tier") or "small")
        if tier not in TIERS:
            raise ConfigError(f"context 'tier' must be one of {', '.join(TIERS)}; got {tier!r}")
        tiers = node.try_get_context("tiers") or {}
        tier_values: dict[str, Any] = dict(tiers.get(tier, {}))
        hints = get_type_hints(cls)
        values: dict[str, Any] = {"tier": tier}
        for f in fields(cls):
            if f.name == "tier":
                continue
            raw = node.try_get_context(f.name)
            if raw is None:
                raw = tier_values.get(f.name)
            if raw is None:
                continue
            values[f.name] = _coerce(f.name, raw, hints[f.name])
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.store_backend not in STORE_BACKENDS:
            raise ConfigError(
                f"store_backend must be one of {', '.join(STORE_BACKENDS)}; got {self.store_backend!r}"
            )
        if self.uses_postgres:
            self._validate_aurora()
        if self.uses_opensearch and not self.opensearch_serverless:
            if self.opensearch_zones not in (2, 3):
                raise ConfigError("opensearch_zones must be 2 or 3")
            if self.opensearch_data_nodes % self.opensearch_zones:
                raise ConfigError("opensearch_data_nodes must be a multiple of opensearch_zones")
        if self.coarse_dim > self.embedding_dim:
            raise ConfigError("coarse_dim must not exceed embedding_dim")
        if self.coarse_dim < self.embedding_dim and not prefix_is_meaningful(self.bedrock_embedding_model):
            # Every container would log the embedder's warning, and the coarse pass would be weaker.
            raise ConfigError(
                f"coarse_dim {self.coarse_dim} < embedding_dim {self.embedding_dim}, but "
                f"{self.bedrock_embedding_model} is not Matryoshka-trained: set coarse_dim to "
                f"{self.embedding_dim} (the whole vector) or use a prefix-trained model (cohere.embed-v4:0)"
            )
        if self.api_gateway_logging_role not in ("none", "existing", "create"):
            raise ConfigError(
                "api_gateway_logging_role must be none, existing or create; "
                f"got {self.api_gateway_logging_role!r}"
            )
        if self.cognito_ui_client_id and not self.cognito_user_pool_arn:
            raise ConfigError(
                "cognito_ui_client_id needs cognito_user_pool_arn (the pool the client belongs to)"
            )
        if self.cognito_user_pool_arn and not re.fullmatch(
            r"arn:aws[\w-]*:cognito-idp:[a-z0-9-]+:\d{12}:userpool/[\w-]+_\w+", self.cognito_user_pool_arn
        ):
            raise ConfigError(f"cognito_user_pool_arn is not a user pool ARN: {self.cognito_user_pool_arn!r}")
        if self.consolidation_rate_minutes < 1:
            raise ConfigError("consolidation_rate_minutes must be at least 1")
        from stacks.constructs.environment import validate_overrides  # it imports this module

        validate_overrides(self.settings)

    def _validate_aurora(self) -> None:
        # Serverless v2 capacity: 0 (auto-pause) to 256 ACU, in steps of 0.5.
        for name in ("aurora_min_acu", "aurora_max_acu"):
            value = getattr(self, name)
            if not 0 <= value <= 256 or value * 2 != int(value * 2):
                raise ConfigError(f"{name} must be between 0 and 256 in steps of 0.5; got {value:g}")
        if self.aurora_max_acu < max(self.aurora_min_acu, 1):
            raise ConfigError("aurora_max_acu must be at least 1 and not below aurora_min_acu")
        if not 5 <= self.aurora_auto_pause_minutes <= 1440:
            raise ConfigError("aurora_auto_pause_minutes must be between 5 and 1440")
        if not 1 <= self.aurora_backup_days <= 35:
            raise ConfigError("aurora_backup_days must be between 1 and 35")
        if self.coarse_dim > 2000:
            raise ConfigError("coarse_dim must be at most 2000 for pgvector's HNSW index")

    @property
    def cognito_region(self) -> str:
        """The region of the user pool (its ARN's fourth field), "" without one."""
        return self.cognito_user_pool_arn.split(":")[3] if self.cognito_user_pool_arn else ""

    def replace(self, **changes: Any) -> StackConfig:
        return dataclasses.replace(self, **changes)


def _coerce(name: str, raw: Any, hint: Any) -> Any:
    """``-c`` gives strings; cdk.json gives JSON types. Both become the field's type."""
    try:
        if hint is bool:
            if isinstance(raw, str):
                if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(raw)
                return raw.lower() in ("true", "1", "yes")
            return bool(raw)
        if hint is int:
            return int(raw)
        if hint is float:
            return float(raw)
        if hint == dict[str, Any]:
            value = json.loads(raw) if isinstance(raw, str) else raw
            if not isinstance(value, dict):
                raise ValueError(raw)
            return dict(value)
        if hint == tuple[str, ...]:
            if isinstance(raw, str):
                raw = json.loads(raw) if raw.startswith("[") else raw.split(",")
            return tuple(str(x) for x in raw if str(x))
        return str(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"context {name!r}: cannot read {raw!r} as {getattr(hint, '__name__', hint)}"
        ) from exc
