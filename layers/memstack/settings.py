"""One typed settings object, read once from ``MEMSTACK_*`` environment variables, made of sections.

Logic never reads ``os.environ``: it receives a ``Settings``, or only the section
it needs (``settings.retrieval`` is the pipeline's ``RetrievalConfig``). Each
setting is declared once, with its default and its checks, in its section
(``memstack.section``); the domain's sections live beside the code that reads
them, the adapters' here. The variable of a field is ``MEMSTACK_<name>``, the
name being the field's alias when it has one: the names are those of the flat
settings of earlier releases. ``load_settings`` turns a bad value into one
``SettingsError`` that names the variable.

Adding a knob: one field in its section. ``Settings.variables()`` lists every
variable with its default (the stack builds each function's environment from
it), ``load_settings(name=value)`` and the environment take the flat names.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.sections import (
    ConsolidationConfig,
    ExtractionConfig,
    IngestConfig,
    Matryoshka,
    ProfileConfig,
)
from memstack.errors import SettingsError
from memstack.section import Section, is_setting

StoreBackend = Literal["embedded", "dynamodb", "postgres", "opensearch"]
StmBackend = Literal["embedded", "dynamodb"]
QueueBackend = Literal["local", "sqs"]
EmbedderName = Literal["hashing", "minilm", "mpnet", "bedrock-titan", "bedrock-cohere"]
RerankerName = Literal["none", "bedrock"]
LlmName = Literal["local", "bedrock", "openai"]
StructuredOutput = Literal["auto", "tools", "json_schema"]

PREFIX = "MEMSTACK_"


class EmbeddingSettings(Matryoshka):
    embedding_dim: int = Field(384, ge=8, le=4096, description="full dimension (hashing and Bedrock)")
    blas_threads: int = Field(
        1,
        ge=0,
        le=256,
        description="BLAS threads numpy may use in this process (0 leaves the library default); "
        "concurrency comes from requests, and OpenBLAS's own threads slow a shared machine down",
    )
    embedding_memo: int = Field(
        4096,
        ge=0,
        le=1_000_000,
        description="vectors kept in memory by text, so ingest and extraction embed each text once "
        "(0: none); 4096 vectors of 384 floats are 6 MB",
    )


class QueueSettings(Section):
    queue_max_attempts: int = Field(3, ge=1, le=100)
    job_idempotency_seconds: int = Field(
        345_600, ge=60, description="how long a worker remembers a done job id (SQS keeps messages 4 days)"
    )
    queue_lease_seconds: float = Field(
        15.0,
        ge=1.0,
        le=3600.0,
        description="how long a claimed job stays hidden; a heartbeat renews it while the job runs",
    )
    job_status_ttl_seconds: int = Field(
        604_800,
        ge=60,
        le=31_536_000,
        description="how long GET /v1/jobs/{id} answers after a job's last change (a week: time to look)",
    )


class WebhookSettings(Section):
    """Webhook delivery: the outbound policy, and how the SQLite queue retries (SQS: its own policy)."""

    webhook_allowed_hosts: str | None = Field(
        None,
        max_length=2000,
        description="comma-separated hosts a webhook may reach over http and at private addresses "
        "(unset: https to public addresses only)",
    )
    webhook_timeout_seconds: float = Field(10.0, gt=0, le=60, description="longest wait for a receiver")
    webhook_max_attempts: int = Field(
        8, ge=1, le=50, description="SQLite queue: deliveries tried before the dead-letter list"
    )
    webhook_backoff_seconds: float = Field(
        30.0, ge=0, le=3600, description="SQLite queue: first wait before a retry, doubling each time"
    )

    def allowed_hosts(self) -> list[str]:
        return [h.strip() for h in (self.webhook_allowed_hosts or "").split(",") if h.strip()]


class SchedulerSettings(Section):
    """Which users are due for consolidation, and the outbox sweep of messages never extracted."""

    consolidation_threshold: int = Field(10, ge=1)
    consolidation_max_age_hours: float = Field(24.0, gt=0)
    consolidation_interval_seconds: float = Field(
        3600.0, gt=0, description="how often the scheduler runs (memstack serve's timer; job id slot)"
    )
    outbox_sweep_after_seconds: float = Field(
        300.0,
        ge=1.0,
        description="scheduler: re-enqueue extraction of a message still pending this long after it arrived",
    )
    outbox_sweep_window_hours: float = Field(
        24.0, gt=0, description="scheduler: older pending messages are left to the dead-letter queue"
    )
    outbox_sweep_limit: int = Field(
        1000, ge=1, le=100_000, description="scheduler: most re-enqueued per pass"
    )


class ApiLimits(Section):
    api_keys: str | None = Field(None, description="comma-separated key=tenant pairs")
    max_message_chars: int = Field(
        16_000, ge=1, description="longest memory text a caller writes (PATCH); a message may fill the body"
    )
    max_messages_per_request: int = Field(100, ge=1)
    max_query_chars: int = Field(4_000, ge=1)
    max_top_k: int = Field(100, ge=1)
    max_body_bytes: int = Field(1_048_576, ge=1024)
    idempotency_expires_seconds: int = Field(
        3600, ge=1, description="how long an Idempotency-Key is remembered"
    )
    max_json_depth: int = Field(32, ge=4, le=512, description="deepest nesting of a JSON request body")
    # A Lambda answer is at most 6 MB with its envelope (API Gateway's own limit, 10 MB, is wider):
    # a page is measured as it is escaped in that answer, and 5 MB leaves room for the rest.
    max_export_page_bytes: int = Field(
        5_000_000,
        ge=65_536,
        le=5_800_000,
        description="largest page of GET /v1/users/{id}/export, as the API Lambda's answer counts it",
    )
    earliest_time: datetime = Field(
        datetime(1900, 1, 1, tzinfo=UTC), description="earliest timestamp or date any request may carry"
    )
    latest_time: datetime = Field(
        datetime(2200, 1, 1, tzinfo=UTC), description="latest timestamp or date any request may carry"
    )
    sync_timeout_seconds: float | None = Field(
        None, gt=0, description="longest a sync=true request waits for its own jobs (unset: until done)"
    )
    # The memory browser's Cognito sign-in (docs/ui.md): the page asks the pool's own endpoint for
    # tokens with a user name and password, so it needs the app client and the pool's region.
    ui_cognito_client_id: str | None = Field(
        None,
        # AWS's rule is [\w+]{1,128} in Java's regex, where \w is ASCII. Spelled out: pydantic's
        # Unicode \w repeated 128 times compiles to an automaton costing ~0.1 s of every cold start.
        pattern=r"^[A-Za-z0-9_+]{1,128}$",
        description="memory browser sign-in: the Cognito app client (no secret, USER_PASSWORD_AUTH)",
    )
    ui_cognito_region: str | None = Field(
        None, pattern=r"^[a-z]{2}(-[a-z]+)+-\d{1,2}$", description="the region of that app client's user pool"
    )

    @field_validator("earliest_time", "latest_time")
    @classmethod
    def _representable(cls, value: datetime, info: ValidationInfo) -> datetime:
        # Naive means UTC; years 2..9998 keep every time zone shift and window representable.
        value = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        if not 2 <= value.astimezone(UTC).year <= 9998:
            raise ValueError("must be between the years 2 and 9998")
        earliest = info.data.get("earliest_time")  # validated first: it is declared first
        if info.field_name == "latest_time" and earliest is not None and value <= earliest:
            raise ValueError("must be after MEMSTACK_EARLIEST_TIME")
        return value

    @model_validator(mode="after")
    def _cognito_sign_in_whole(self) -> ApiLimits:
        if (self.ui_cognito_client_id is None) != (self.ui_cognito_region is None):
            raise ValueError("set MEMSTACK_UI_COGNITO_CLIENT_ID and MEMSTACK_UI_COGNITO_REGION together")
        return self


class ServerSettings(Section):
    """memstack serve: its connections (docs/reliability.md), and the embedded store's disk reserve."""

    storage_reserve_bytes: int = Field(
        16 * 1024 * 1024,
        ge=0,
        description="embedded: space kept back on the data volume so an erase works on a full disk (0: none)",
    )
    server_connection_limit: int = Field(
        200, ge=2, le=100_000, description="open connections at most; a new one evicts the quietest idle one"
    )
    server_connections_per_client: int = Field(
        20,
        ge=1,
        le=100_000,
        description="open connections one client address may hold (behind a proxy: raise)",
    )
    server_idle_timeout_seconds: float = Field(
        10.0, ge=1.0, le=3600.0, description="a connection with nothing in flight is closed after this long"
    )
    server_request_timeout_seconds: float = Field(
        30.0, ge=1.0, le=3600.0, description="a request must arrive whole within this long of its first byte"
    )


class McpSettings(Section):
    """The MCP server (memstack mcp, /mcp on memstack serve)."""

    mcp_user_id: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="the one user the MCP tools act for (else a tool argument)",
    )
    mcp_agent_id: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="the agent the MCP tools act as: tags what they add, filters what they read",
    )
    mcp_allow_erase: bool = Field(False, description="offer the erase_user tool (off: a model cannot erase)")


class AwsResources(Section):
    """The region and the resources the stack creates (names, URLs)."""

    aws_region: str | None = None
    memories_table: str | None = None
    # The small tier's packed per-user snapshots (the dynamodb store): what a cold container loads.
    snapshot_bucket: str | None = Field(
        None, description="S3 bucket of the dynamodb store's packed snapshots (unset: none are kept)"
    )
    snapshot_compact_writes: int = Field(
        64,
        ge=1,
        le=100_000,
        description="writes after a user's stored snapshot before the workers store a new one",
    )
    stm_table: str | None = None
    idempotency_table: str | None = None
    extraction_queue_url: str | None = None
    consolidation_queue_url: str | None = None
    # Dead-letter queues; unset means read from the source queue's RedrivePolicy.
    extraction_dlq_url: str | None = None
    consolidation_dlq_url: str | None = None
    webhook_queue_url: str | None = None
    webhook_dlq_url: str | None = None
    cursor_secret_arn: str | None = Field(
        None, description="Secrets Manager secret that keys list cursors (unset: <data dir>/cursor.key)"
    )


class PostgresSettings(Section):
    """PostgreSQL + pgvector (store_backend=postgres): a direct DSN (psycopg) or the RDS Data API."""

    executor: Literal["psycopg", "data-api"] = Field("psycopg", alias="postgres_executor")
    dsn: str | None = Field(
        None, alias="postgres_dsn", description="libpq connection string (postgres_executor=psycopg)"
    )
    cluster_arn: str | None = Field(
        None, alias="postgres_cluster_arn", description="Aurora cluster (postgres_executor=data-api)"
    )
    secret_arn: str | None = Field(
        None, alias="postgres_secret_arn", description="Secrets Manager secret of the database user"
    )
    database: str = Field("memstack", alias="postgres_database")
    schema_name: str = Field("memstack", pattern=r"^[a-z_][a-z0-9_]{0,62}$", alias="postgres_schema")
    pool_size: int = Field(
        4, ge=1, le=100, alias="postgres_pool_size", description="most connections one process opens"
    )
    connect_timeout: float = Field(10.0, gt=0, alias="postgres_connect_timeout")
    migrate_on_start: bool = Field(
        True, alias="postgres_migrate_on_start", description="apply pending migrations when the store opens"
    )
    exact_search_below: int = Field(
        2000,
        ge=0,
        alias="postgres_exact_search_below",
        description="rows per user below which vector search scans exactly instead of HNSW",
    )


class OpenSearchSettings(Section):
    endpoint: str | None = Field(None, alias="opensearch_endpoint")
    index: str = Field("memstack-memories", alias="opensearch_index")
    service: Literal["es", "aoss"] = Field("es", alias="opensearch_service")
    engine: Literal["faiss", "lucene"] = Field("faiss", alias="opensearch_engine")
    hnsw_m: int = Field(16, ge=2, alias="opensearch_hnsw_m")
    hnsw_ef_construction: int = Field(128, ge=2, alias="opensearch_hnsw_ef_construction")
    refresh: Literal["false", "true", "wait_for"] = Field(
        "wait_for",
        alias="opensearch_refresh",
        description="managed domains only: serverless collections refuse the parameter",
    )
    visibility_seconds: float = Field(
        15.0,
        ge=0,
        alias="opensearch_visibility_seconds",
        description="serverless: how long a write takes to become searchable (erase waits it)",
    )


class BedrockSettings(Section):
    extraction_model: str = Field(
        "us.anthropic.claude-haiku-4-5-20251001-v1:0", alias="bedrock_extraction_model"
    )
    synthesis_model: str = Field(
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0", alias="bedrock_synthesis_model"
    )
    embedding_model: str = Field("amazon.titan-embed-text-v2:0", alias="bedrock_embedding_model")
    rerank_model_arn: str | None = Field(None, alias="bedrock_rerank_model_arn")
    max_tokens: int = Field(1024, ge=1, alias="bedrock_max_tokens")
    prompt_cache: Literal["auto", "true", "false"] = Field(
        "auto",
        alias="bedrock_prompt_cache",
        description="cache points after the fixed system prompt and tool schema (auto: only for a model "
        "that takes them and caches a prefix that short)",
    )
    temperature: float = Field(0.0, ge=0.0, le=1.0, alias="bedrock_temperature")


class OpenAISettings(Section):
    """An OpenAI-compatible LLM server (MEMSTACK_LLM=openai: OpenAI, vLLM, Ollama, llama.cpp, LM Studio)."""

    base_url: str = Field(
        "http://127.0.0.1:8080/v1", alias="openai_base_url", description="the server's /v1 root"
    )
    model: str = Field("gpt-4o-mini", min_length=1, alias="openai_model", description="extraction model")
    synthesis_model: str | None = Field(
        None, alias="openai_synthesis_model", description="consolidation model (default: the same)"
    )
    api_key: SecretStr | None = Field(
        None, alias="openai_api_key", description="sent as a Bearer token when set"
    )
    structured_output: StructuredOutput = Field(
        "auto",
        alias="openai_structured_output",
        description="tools, response_format json_schema, or auto (tools, then json_schema)",
    )
    timeout_seconds: float = Field(60.0, gt=0, alias="openai_timeout_seconds")
    temperature: float = Field(0.0, ge=0.0, le=2.0, alias="openai_temperature")
    max_tokens: int = Field(1024, ge=1, alias="openai_max_tokens")


class CostSettings(Section):
    """The daily cost report and its tags."""

    cost_report_threshold: float = Field(10.0, ge=0.0)
    alert_topic_arn: str | None = None
    project_tag: str = "memstack"
    tier_tag: str | None = Field(None, description="the Tier cost tag (the stack sets it); unset: all tiers")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore", frozen=True)

    # --- where and which backends (the root: no section) -----------------------------
    data_dir: Path = Path(".memstack")
    store_backend: StoreBackend = "embedded"
    stm_backend: StmBackend = "embedded"
    queue_backend: QueueBackend = "local"
    embedder: EmbedderName = "minilm"
    reranker: RerankerName = "none"
    llm: LlmName = "local"
    default_tenant: str = Field("local", min_length=1, description="tenant of the CLI on the embedded store")
    timezone: str = Field("UTC", description="timezone applied to naive timestamps")

    # --- sections ---------------------------------------------------------------------
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    consolidation: ConsolidationConfig = Field(default_factory=ConsolidationConfig)
    profiles: ProfileConfig = Field(default_factory=ProfileConfig)
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    webhooks: WebhookSettings = Field(default_factory=WebhookSettings)
    api: ApiLimits = Field(default_factory=ApiLimits)
    server: ServerSettings = Field(default_factory=ServerSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    aws: AwsResources = Field(default_factory=AwsResources)
    postgres: PostgresSettings = Field(default_factory=PostgresSettings)
    opensearch: OpenSearchSettings = Field(default_factory=OpenSearchSettings)
    bedrock: BedrockSettings = Field(default_factory=BedrockSettings)
    openai: OpenAISettings = Field(default_factory=OpenAISettings)
    cost: CostSettings = Field(default_factory=CostSettings)

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource, *_: Any, **__: Any
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments first, then the flat MEMSTACK_* variables (never a .env file or secrets dir).
        return (init_settings, _FlatEnvironment(settings_cls))

    @model_validator(mode="before")
    @classmethod
    def _nest(cls, data: Any) -> Any:
        """Flat names (``rrf_k=5``, ``MEMSTACK_RRF_K``) into their sections; a section given whole is kept."""
        return nest(data) if isinstance(data, dict) else data

    @field_validator("data_dir")
    @classmethod
    def _data_dir_is_a_directory(cls, value: Path) -> Path:
        # Said here, by name, rather than as "File exists" from the first mkdir.
        if value.exists() and not value.is_dir():
            raise ValueError(f"{value} is a file; it must be a directory (or not exist yet)")
        return value

    @model_validator(mode="after")
    def _check_consistency(self) -> Settings:
        if self.embedding.coarse_dim > self.embedding.embedding_dim:
            raise ValueError("coarse_dim must not exceed embedding_dim")
        return self

    @property
    def db_path(self) -> Path:
        return self.data_dir / "memstack.sqlite3"

    def api_key_map(self) -> dict[str, str]:
        """``MEMSTACK_API_KEYS`` as {key: tenant}; unset means the one dev key.

        The dev key's tenant is the CLI's (``MEMSTACK_DEFAULT_TENANT``): what ``memstack
        ingest`` wrote, ``memstack serve`` finds with ``dev-key``, and the other way round.
        """
        if not self.api.api_keys:
            return {"dev-key": self.default_tenant}
        pairs: dict[str, str] = {}
        for item in self.api.api_keys.split(","):
            key, sep, tenant = item.strip().partition("=")
            if not sep or not key or not tenant:
                raise SettingsError(f"MEMSTACK_API_KEYS: expected key=tenant pairs, got {item.strip()!r}")
            pairs[key] = tenant
        return pairs

    # --- the flat view: one name per variable ----------------------------------------------
    @classmethod
    def variables(cls) -> dict[str, Any]:
        """Every variable's name (``MEMSTACK_`` left off, lower case) and its default."""
        return {name: _default(info) for name, (_, info) in _VARIABLES.items()}

    def value(self, name: str) -> Any:
        """The value of the variable ``name`` (as ``variables`` names it)."""
        path, _ = _VARIABLES[name]
        node: Any = self
        for step in path:
            node = getattr(node, step)
        return node

    def values(self) -> dict[str, Any]:
        """Every variable and its value here (what ``load_settings(**settings.values())`` rebuilds)."""
        return {name: self.value(name) for name in _VARIABLES}

    def updated(self, **values: Any) -> Settings:
        """These settings with some variables changed (flat names), validated again."""
        return load_settings(**{**_given(self), **values})


def _sections(
    model: type[BaseModel], path: tuple[str, ...] = ()
) -> Iterator[tuple[str, tuple[str, ...], FieldInfo]]:
    """(variable name, field path, field) of every setting under ``model``, nested sections included."""
    for field_name, info in model.model_fields.items():
        if not is_setting(info.json_schema_extra):
            continue
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, Section):
            yield from _sections(kind, (*path, field_name))
        else:
            yield info.alias or field_name, (*path, field_name), info


def _variables() -> tuple[dict[str, tuple[tuple[str, ...], FieldInfo]], dict[str, list[tuple[str, ...]]]]:
    first: dict[str, tuple[tuple[str, ...], FieldInfo]] = {}
    paths: dict[str, list[tuple[str, ...]]] = {}
    for name, path, info in _sections(Settings):
        if name in first and first[name][1].annotation != info.annotation:
            raise TypeError(f"MEMSTACK_{name.upper()} is declared twice with different types")
        first.setdefault(name, (path, info))
        paths.setdefault(name, []).append(path)
    return first, paths


def _default(info: FieldInfo) -> Any:
    return info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"rrf_k": 5, "data_dir": ...}`` as ``{"retrieval": {"rrf_k": 5}, ..., "data_dir": ...}``.

    A name shared by sections (``coarse_dim``) goes to each; a section given whole
    (``retrieval=RetrievalConfig(...)``) is kept, and flat names given beside it win.
    """
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key not in _PATHS:
            # A root setting, a whole section (its fields, so flat names can be merged in), or unknown.
            given = value.model_dump() if isinstance(value, BaseModel) else value
            out[key] = (
                {**given, **out[key]} if isinstance(given, dict) and isinstance(out.get(key), dict) else given
            )
            continue
        for path in _PATHS[key]:
            node = out
            for step in path[:-1]:
                child = node.get(step)
                node[step] = child = child.model_dump() if isinstance(child, BaseModel) else (child or {})
                node = child
            node[path[-1]] = value
    return out


def _given(settings: Settings) -> dict[str, Any]:
    # SecretStr values as given, so a rebuild keeps them.
    return {
        name: value.get_secret_value() if isinstance(value, SecretStr) else value
        for name, value in settings.values().items()
    }


class _FlatEnvironment(PydanticBaseSettingsSource):
    """Each setting from ``MEMSTACK_<NAME>`` (any case), as the flat settings always read them."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every variable at once

    def __call__(self) -> dict[str, Any]:
        environ = {key.upper(): value for key, value in os.environ.items()}
        names = [*_PATHS, *(n for n in Settings.model_fields if n not in _SECTIONS)]
        return {name: environ[PREFIX + name.upper()] for name in names if PREFIX + name.upper() in environ}


_SECTIONS = {
    name
    for name, info in Settings.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, Section)
}
_VARIABLES, _PATHS = _variables()
for _root in Settings.model_fields:
    if _root not in _SECTIONS:
        _VARIABLES[_root] = ((_root,), Settings.model_fields[_root])
#: field path (section, ..., field) -> its variable's name
VARIABLE_OF = {path: name for name, paths in _PATHS.items() for path in paths} | {
    (name,): name for name in Settings.model_fields if name not in _SECTIONS
}


def load_settings(**overrides: object) -> Settings:
    """Read the environment once; overrides (flat names) win (tests and CLI flags use them)."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsError("invalid configuration: " + "; ".join(problems(exc))) from None


def problems(exc: ValidationError) -> list[str]:
    """Each error as "MEMSTACK_<NAME>: <message>" (the variable to fix), or "settings: ..."."""
    out = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        name = _variable_at(loc)
        out.append(f"{PREFIX}{name.upper()}: {err['msg']}" if name else f"settings: {err['msg']}")
    return list(dict.fromkeys(out))  # a name shared by sections fails once


def _variable_at(loc: tuple[str, ...]) -> str | None:
    if not loc:
        return None
    for end in range(len(loc), 0, -1):
        if loc[:end] in VARIABLE_OF:
            return VARIABLE_OF[loc[:end]]
    # An alias in the location (pydantic reports the key as given) or a section's own check.
    return loc[-1] if loc[-1] in _VARIABLES else None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (Lambda handlers and the CLI read them once)."""
    return load_settings()
