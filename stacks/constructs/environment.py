"""The ``MEMSTACK_*`` variables of each function: what its handler reads, where it differs from the default.

The values come from one typed ``Settings`` object (layers/memstack/settings.py)
built from ``StackConfig`` (cdk.json context), the resources the stack
creates (tables, queues, topic, search endpoint) and ``-c settings='{...}'``
overrides. Building that object at synth validates every value, so a bad
override stops ``cdk synth`` with the variable's name.

A function carries only the settings its handler reads (``function_reads``:
the sections of ``Settings`` it reads, so a knob added to a section reaches
every function that reads the section) whose deployed value differs from the
``Settings`` default: the function's
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

from memstack.settings import VARIABLE_OF, Settings
from memstack.settings import problems as settings_problems
from pydantic import ValidationError

from stacks.config import ConfigError, StackConfig

#: the sections ``build_service`` reads (Settings' fields): backends' models, embeddings, every
#: pipeline and consolidation knob, the queue's leases and the resources the stack creates
SERVICE_SECTIONS: tuple[str, ...] = ("embedding", "retrieval", "ingest", "extraction", "consolidation")
SERVICE_SECTIONS += ("profiles", "queue", "webhooks", "bedrock", "aws")
#: each store's own section; the ``dynamodb`` store's table is in ``aws``
STORE_SECTIONS = {"opensearch": ("opensearch",), "postgres": ("postgres",)}
#: the sections each function reads on top of the root settings and ``SERVICE_SECTIONS``
FUNCTION_SECTIONS: dict[str, tuple[str, ...]] = {
    "api": ("api",),
    "extraction_worker": (),
    "consolidation_scheduler": ("scheduler",),
    "consolidation_worker": (),
    "webhook_worker": (),
}
#: the API section's time bounds, which the service checks every timestamp against (service.py)
SERVICE_NAMES = ("earliest_time", "latest_time")
#: resources only the API is granted: it alone signs and checks list cursors
API_ONLY = ("cursor_secret_arn",)
#: settings of the sections above that only a local process reads (the CLI's tenant, API keys,
#: the local queue's attempts, a direct DSN): never written into a function's environment
LOCAL_ONLY: tuple[str, ...] = ("default_tenant", "api_keys", "queue_max_attempts", "postgres_dsn")
LOCAL_ONLY += ("postgres_pool_size", "webhook_max_attempts", "webhook_backoff_seconds")
#: functions that build no service: the sections they read and the few other names
#: (``Settings`` checks coarse_dim against embedding_dim and the retrieval weights on load)
OWN_READS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cost_report": (("cost", "embedding"), ("aws_region", "weight_vector", "weight_bm25")),
    # the deploy-time upgrade (plus the postgres store's section or the dynamodb table, ``function_reads``)
    "schema_migration": (("embedding",), ("store_backend", "aws_region")),
}
FUNCTIONS = (*FUNCTION_SECTIONS, *OWN_READS)
#: settings of memstack serve, the MCP server and the CLI, never of a Lambda function
NOT_IN_LAMBDA = ("server", "mcp", "openai")


def section_variables(*sections: str) -> tuple[str, ...]:
    """The variables of these sections of ``Settings`` ("" is the root: backends, data_dir, timezone)."""
    names = (name for path, name in VARIABLE_OF.items() if (path[0] if len(path) > 1 else "") in sections)
    return tuple(dict.fromkeys(names))


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
        **_ui_sign_in(config),
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
    # A setting no function reads would be dropped without a word (memstack serve's API keys, a DSN,
    # another store's options): refused, by name, instead.
    read = {name for function in FUNCTIONS for name in function_reads(config, function)}
    unread = sorted(set(config.settings) - read)
    if unread:
        raise ConfigError(
            f"context 'settings': no function of this stack reads {', '.join(unread)} "
            f"(store_backend={config.store_backend}; memstack serve's and the CLI's own settings stay local)"
        )
    return _validated(values)


def _ui_sign_in(config: StackConfig) -> dict[str, str]:
    """The memory browser's Cognito sign-in (the API serves it to the page), when configured."""
    if not config.cognito_ui_client_id:
        return {}
    return {"ui_cognito_client_id": config.cognito_ui_client_id, "ui_cognito_region": config.cognito_region}


def function_reads(config: StackConfig, function: str) -> tuple[str, ...]:
    """Every variable ``function``'s handler reads, from the sections of ``Settings`` it reads."""
    store = STORE_SECTIONS.get(config.store_backend, ())
    if function in OWN_READS:
        sections, names = OWN_READS[function]
        if function == "schema_migration":
            sections += store
            if config.store_backend == "dynamodb":
                names += ("memories_table",)  # the directory backfill's table
        reads = (*section_variables(*sections), *names)
        return tuple(n for n in dict.fromkeys(reads) if n not in LOCAL_ONLY)
    reads = (*section_variables("", *SERVICE_SECTIONS, *FUNCTION_SECTIONS[function], *store), *SERVICE_NAMES)
    skip = LOCAL_ONLY if function == "api" else LOCAL_ONLY + API_ONLY
    return tuple(n for n in dict.fromkeys(reads) if n not in skip)


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
