"""The ``MEMSTACK_*`` variables of each function: what its handler reads, where it differs from the default.

The values come from one typed ``Settings`` object (layers/memstack/settings.py)
built from ``StackConfig`` (cdk.json context), the resources the stack
creates (tables, queues, topic, search endpoint) and ``-c settings='{...}'``
overrides. Building that object at synth validates every value, so a bad
override stops ``cdk synth`` with the variable's name.

A function carries only the settings its handler reads (``FUNCTION_READS``)
whose deployed value differs from the ``Settings`` default: the function's
layer is built from this same source, so an unset variable reads that very
default. Writing out every default (77-92 variables) took an environment
past Lambda's 4 KB limit, which Lambda measures as the compact JSON of the
``Variables`` map (``environment_bytes``); tests/infra/test_environment_size.py
keeps every tier, variant and documented option below 3 KB with names as
CloudFormation generates them. tests/infra/test_deployed_flow.py records
what each handler really reads while it runs and fails when a name is
missing from its list, so an override can never be silently dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memstack.settings import Settings
from memstack.settings import problems as settings_problems
from pydantic import ValidationError

from stacks.config import ConfigError, StackConfig

#: what ``build_service`` reads: backends, models, embeddings, every pipeline and consolidation knob
SERVICE = (
    "store_backend",
    "stm_backend",
    "queue_backend",
    "embedder",
    "llm",
    "reranker",
    "data_dir",
    "timezone",
    "aws_region",
    "embedding_dim",
    "coarse_dim",
    "blas_threads",
    "bedrock_extraction_model",
    "bedrock_synthesis_model",
    "bedrock_embedding_model",
    "bedrock_rerank_model_arn",
    "bedrock_max_tokens",
    "bedrock_temperature",
    "bedrock_prompt_cache",
    "vector_candidates",
    "bm25_candidates",
    "rrf_k",
    "weight_vector",
    "weight_bm25",
    "weight_prf",
    "weight_vector_memory",
    "weight_bm25_memory",
    "prf_terms",
    "prf_docs",
    "prf_min_docs",
    "score_bias",
    "score_rrf",
    "score_vector",
    "score_coverage",
    "score_result_cosine",
    "score_result_coverage",
    "score_category",
    "temporal_window_days",
    "temporal_blend",
    "temporal_report_lag_days",
    "dedup_threshold",
    "dedup_by_source",
    "rerank_candidates",
    "consolidated_stm_weight",
    "retrieval_pool",
    "history_max_versions",
    "superseded_turns_last",
    "index_context_turns",
    "index_context_after",
    "index_context_embedding",
    "index_date_in_text",
    "extraction_neighbours",
    "stm_ttl_days",
    "summary_max_tokens",
    "synthesis_max_tokens",
    "consolidation_window_hours",
    "consolidation_group_size",
    "consolidation_max_entries",
    "consolidation_duplicate_threshold",
    "consolidation_synthesis_similarity",
    "consolidation_lease_seconds",
    "queue_lease_seconds",
    "earliest_time",
    "latest_time",
    "profile_memories",
    "profile_min_items",
    "profile_max_items",
    "stm_table",
    "idempotency_table",
    "extraction_queue_url",
    "consolidation_queue_url",
    "extraction_dlq_url",
    "consolidation_dlq_url",
)
#: the ``dynamodb`` store's table (small tier)
DYNAMODB_STORE = ("memories_table",)
#: the ``opensearch`` store (medium, large)
OPENSEARCH_STORE = (
    "opensearch_endpoint",
    "opensearch_service",
    "opensearch_index",
    "opensearch_engine",
    "opensearch_hnsw_m",
    "opensearch_hnsw_ef_construction",
    "opensearch_refresh",
    "opensearch_visibility_seconds",
)
#: the ``postgres`` store over the Data API (store_backend=postgres)
POSTGRES_STORE = (
    "postgres_executor",
    "postgres_cluster_arn",
    "postgres_secret_arn",
    "postgres_database",
    "postgres_schema",
    "postgres_connect_timeout",
    "postgres_migrate_on_start",
    "postgres_exact_search_below",
)
API = (
    "max_message_chars",
    "max_messages_per_request",
    "max_query_chars",
    "max_top_k",
    "max_body_bytes",
    "idempotency_expires_seconds",
    "sync_timeout_seconds",
    "max_json_depth",
    "cursor_secret_arn",
)
QUEUE_WORKER = ("job_idempotency_seconds",)
SCHEDULER = (
    "consolidation_threshold",
    "consolidation_max_age_hours",
    "consolidation_interval_seconds",
    "outbox_sweep_after_seconds",
    "outbox_sweep_window_hours",
    "outbox_sweep_limit",
)
COST_REPORT = (
    "aws_region",
    "embedding_dim",
    "coarse_dim",
    "weight_vector",
    "weight_bm25",
    "alert_topic_arn",
    "cost_report_threshold",
    "project_tag",
    "tier_tag",
)

#: the deploy-time migration (plus the postgres store's names, ``function_reads``)
SCHEMA_MIGRATION = ("store_backend", "aws_region", "coarse_dim", "embedding_dim")

FUNCTION_READS: dict[str, tuple[str, ...]] = {
    "api": SERVICE + API,
    "extraction_worker": SERVICE + QUEUE_WORKER,
    "consolidation_scheduler": SERVICE + SCHEDULER,
    "consolidation_worker": SERVICE + QUEUE_WORKER,
    "cost_report": COST_REPORT,
    "schema_migration": SCHEMA_MIGRATION,
}

#: Lambda's only writable path, should anything fall back to local files
LAMBDA_DATA_DIR = "/tmp/memstack"


class _ValuesOnly(Settings):
    """``Settings`` validated from the values given here alone: never this synth machine's MEMSTACK_*."""

    @classmethod
    def settings_customise_sources(cls, settings_cls: Any, init_settings: Any, *_: Any, **__: Any) -> tuple:
        return (init_settings,)


def validate_overrides(overrides: dict[str, Any]) -> None:
    """``-c settings='{...}'``: known names and valid values, or a ConfigError naming the variable."""
    unknown = sorted(set(overrides) - set(Settings.variables()))
    if unknown:
        raise ConfigError(f"context 'settings': {', '.join(unknown)} are not memstack settings")
    _validated(overrides)


def _validated(values: dict[str, Any]) -> Settings:
    try:
        return _ValuesOnly(**values)
    except ValidationError as exc:
        # settings.problems names the MEMSTACK_* variable to fix, not the section path of the field.
        raise ConfigError(f"invalid function settings: {'; '.join(settings_problems(exc))}") from None


def deployment_settings(config: StackConfig, resources: dict[str, str]) -> Settings:
    """The one ``Settings`` every function is configured from (``resources``: names, URLs, ARNs)."""
    values: dict[str, Any] = {
        "store_backend": config.store_backend,
        "stm_backend": "dynamodb",
        "queue_backend": "sqs",
        "embedder": "bedrock-titan",
        "llm": "bedrock",
        "reranker": config.reranker,
        "data_dir": LAMBDA_DATA_DIR,
        "embedding_dim": config.embedding_dim,
        "coarse_dim": config.coarse_dim,
        "bedrock_extraction_model": config.bedrock_extraction_model,
        "bedrock_synthesis_model": config.bedrock_synthesis_model,
        "bedrock_embedding_model": config.bedrock_embedding_model,
        "bedrock_rerank_model_arn": config.bedrock_rerank_model_arn or None,
        # The schedule's rate is the scheduler's job-id slot: a slot longer than the rate would give
        # two runs the same job id, and the worker's idempotency would drop the second.
        "consolidation_interval_seconds": config.consolidation_rate_minutes * 60,
        "cost_report_threshold": config.cost_report_threshold,
        "project_tag": config.service_name,
        "tier_tag": config.tier,
        **config.settings,
        **resources,
    }
    if config.store_backend == "postgres":
        # Migrations run at deploy time (the schema custom resource): a cold start, the hourly
        # scheduler's above all, must not resume a paused Aurora cluster to find nothing to apply.
        values["postgres_migrate_on_start"] = False
    validate_overrides(config.settings)
    # The stack's own resources cannot be overridden: IAM is granted on them, not on a name from context.
    clash = sorted(set(config.settings) & set(resources))
    if clash:
        raise ConfigError(f"context 'settings' cannot set {', '.join(clash)}: the stack creates those")
    return _validated(values)


def function_reads(config: StackConfig, function: str) -> tuple[str, ...]:
    reads = FUNCTION_READS[function]
    if function != "cost_report":
        stores = {"opensearch": OPENSEARCH_STORE, "postgres": POSTGRES_STORE}
        reads += stores.get(config.store_backend, DYNAMODB_STORE)
    return tuple(dict.fromkeys(reads))


def env_value(value: Any) -> str:
    """How ``Settings`` reads a value back from the environment."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value)
    return str(value)


def default_of(name: str) -> Any:
    """What ``Settings`` reads when ``MEMSTACK_<NAME>`` is unset."""
    return Settings.variables()[name]


def function_environment(settings: Settings, names: tuple[str, ...]) -> dict[str, str]:
    """``MEMSTACK_<NAME>`` for each name whose value is not the default (an unset variable reads it)."""
    env = {}
    for name in names:
        value = settings.value(name)
        if value is not None and value != default_of(name):
            env[f"MEMSTACK_{name.upper()}"] = env_value(value)
    return env


def environment_bytes(variables: dict[str, str]) -> int:
    """The size Lambda limits to 4 KB: the ``Variables`` map as compact JSON, in UTF-8 bytes."""
    return len(json.dumps(variables, separators=(",", ":"), ensure_ascii=False).encode())
