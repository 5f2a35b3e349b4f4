"""One typed settings object, read once from ``MEMSTACK_*`` environment variables.

Logic never reads ``os.environ``: it receives a ``Settings``. ``load_settings``
turns a bad value into one ``SettingsError`` that names the variable.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memstack.domain.retrieval.calibration import DEFAULT_SCORE_MODEL
from memstack.errors import SettingsError

StoreBackend = Literal["embedded", "dynamodb", "postgres", "opensearch"]
StmBackend = Literal["embedded", "dynamodb"]
QueueBackend = Literal["local", "sqs"]
EmbedderName = Literal["hashing", "minilm", "mpnet", "bedrock-titan", "bedrock-cohere"]
RerankerName = Literal["none", "bedrock"]
LlmName = Literal["local", "bedrock", "openai"]
StructuredOutput = Literal["auto", "tools", "json_schema"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMSTACK_", extra="ignore", frozen=True)

    # --- where and which backends -------------------------------------------------
    data_dir: Path = Path(".memstack")
    store_backend: StoreBackend = "embedded"
    stm_backend: StmBackend = "embedded"
    queue_backend: QueueBackend = "local"
    embedder: EmbedderName = "minilm"
    reranker: RerankerName = "none"
    llm: LlmName = "local"
    default_tenant: str = Field("local", min_length=1, description="tenant of the CLI on the embedded store")
    timezone: str = Field("UTC", description="timezone applied to naive timestamps")

    # --- embeddings ----------------------------------------------------------------
    embedding_dim: int = Field(384, ge=8, le=4096, description="full dimension (hashing and Bedrock)")
    coarse_dim: int = Field(128, ge=8, le=4096, description="Matryoshka prefix for the coarse pass")
    blas_threads: int = Field(
        1,
        ge=0,
        le=256,
        description="BLAS threads numpy may use in this process (0 leaves the library default); "
        "concurrency comes from requests, and OpenBLAS's own threads slow a shared machine down",
    )

    # --- retrieval pipeline (defaults from the Cognis paper unless measured better) -
    vector_candidates: int = Field(200, ge=1, le=10_000)
    bm25_candidates: int = Field(200, ge=1, le=10_000)
    # The paper's k=10 and 0.7/0.3 measured worse with the offline MiniLM model on
    # LoCoMo (recall@10 0.60 against 0.79 with these); see docs/retrieval.md.
    rrf_k: int = Field(5, ge=1)
    weight_vector: float = Field(0.3, ge=0.0)
    weight_bm25: float = Field(0.7, ge=0.0)
    weight_prf: float = Field(0.3, ge=0.0, description="RRF weight of the BM25 feedback query's ranking")
    # A memory whose turn is a candidate too is a second view of it: its embedding adds much,
    # its BM25 little (LoCoMo, extraction on: docs/retrieval.md, "Evidence units").
    weight_vector_memory: float = Field(0.3, ge=0.0, description="RRF weight of a memory's vector rank")
    weight_bm25_memory: float = Field(0.1, ge=0.0, description="RRF weight of a memory's BM25 rank")
    # Off by default: +0.003 recall@10 / +0.007 @25 with extraction on LoCoMo, for a second BM25
    # query that made each search ~1.5x slower (docs/retrieval.md); MEMSTACK_PRF_TERMS=10 turns it on.
    prf_terms: int = Field(0, ge=0, le=50, description="terms pseudo-relevance feedback adds (0: off)")
    prf_docs: int = Field(5, ge=1, le=50, description="first BM25 hits the feedback terms come from")
    prf_min_docs: int = Field(2, ge=1, le=50, description="feedback hits a term must occur in")
    # The calibrated score (stage 4): σ(bias + rrf·RRF + vector·cosine + coverage·coverage),
    # fitted by scripts/calibrate_scores.py for the minilm embedder (docs/retrieval.md).
    score_bias: float = Field(DEFAULT_SCORE_MODEL.bias, description="calibrated score: intercept")
    score_rrf: float = Field(DEFAULT_SCORE_MODEL.rrf, description="calibrated score: weight of scaled RRF")
    score_vector: float = Field(DEFAULT_SCORE_MODEL.vector, description="calibrated score: weight of cosine")
    score_coverage: float = Field(
        DEFAULT_SCORE_MODEL.coverage, description="calibrated score: weight of query-word coverage"
    )
    score_result_cosine: float = Field(
        DEFAULT_SCORE_MODEL.result_cosine, description="calibrated score: weight of the result's own cosine"
    )
    score_result_coverage: float = Field(
        DEFAULT_SCORE_MODEL.result_coverage, description="calibrated score: weight of a result's coverage"
    )
    score_category: float = Field(
        DEFAULT_SCORE_MODEL.category, description="calibrated score: weight of category affinity (0: off)"
    )
    temporal_window_days: float = Field(30.0, gt=0.0)
    temporal_blend: float = Field(0.6, ge=0.0, le=1.0, description="share of the fused score in the blend")
    temporal_report_lag_days: float = Field(
        7.0, ge=0.0, le=365.0, description="days after a query's window a memory still counts as inside it"
    )
    dedup_threshold: float = Field(0.99, gt=0.0, le=1.0)
    dedup_by_source: bool = Field(
        True, description="drop a raw turn when an LTM memory made from it is also a result"
    )
    rerank_candidates: int = Field(50, ge=1, le=1000)
    consolidated_stm_weight: float = Field(
        0.5, ge=0.0, le=1.0, description="score factor for STM already consolidated (0 hides it)"
    )
    retrieval_pool: int = Field(
        100, ge=1, le=10_000, description="fused candidates carried into the temporal/dedup/rerank stages"
    )
    superseded_turns_last: bool = Field(
        True, description="rank raw turns whose memories were all replaced below current memories"
    )
    history_max_versions: int = Field(
        20, ge=1, le=1000, description="versions per chain a history query shows"
    )
    index_context_turns: int = Field(
        2, ge=0, le=10, description="earlier turns of the same batch indexed (BM25) with each turn"
    )
    index_context_after: int = Field(
        0, ge=0, le=10, description="later turns of the same batch indexed (BM25) with each turn"
    )
    index_context_embedding: bool = Field(False, description="embed each turn with that context too")
    index_date_in_text: bool = Field(True, description="index each turn's date with its text (BM25)")

    # --- ingestion and consolidation -------------------------------------------------
    extraction_neighbours: int = Field(10, ge=1, le=100)
    stm_ttl_days: int = Field(30, ge=1)
    consolidation_threshold: int = Field(10, ge=1)
    consolidation_max_age_hours: float = Field(24.0, gt=0)
    summary_max_tokens: int = Field(300, ge=16)
    synthesis_max_tokens: int = Field(400, ge=16)
    queue_max_attempts: int = Field(3, ge=1, le=100)
    # Off by default: measured on LoCoMo with consolidation, recall did not gain (docs/retrieval.md).
    profile_memories: bool = Field(
        False, description="consolidation keeps one profile memory per person and category (cross-session)"
    )
    profile_min_items: int = Field(2, ge=1, le=100, description="memories a profile needs to be written")
    profile_max_items: int = Field(
        12, ge=1, le=100, description="most memories (newest first) one profile lists"
    )
    consolidation_window_hours: float = Field(24.0, gt=0, description="longest time span one summary covers")
    consolidation_group_size: int = Field(20, ge=1, le=500, description="most STM turns one summary covers")
    consolidation_max_entries: int = Field(
        500, ge=1, description="most STM turns one job reads (oldest first; the next run takes the rest)"
    )
    consolidation_duplicate_threshold: float = Field(
        0.95, gt=0.0, le=1.0, description="cosine at which a summary is already known (NONE)"
    )
    consolidation_synthesis_similarity: float = Field(
        0.6, ge=0.0, le=1.0, description="cosine at which summaries and memories are synthesised together"
    )
    consolidation_interval_seconds: float = Field(
        3600.0, gt=0, description="how often the scheduler runs (memstack serve's timer; job id slot)"
    )
    job_idempotency_seconds: int = Field(
        345_600, ge=60, description="how long a worker remembers a done job id (SQS keeps messages 4 days)"
    )
    queue_lease_seconds: float = Field(
        15.0,
        ge=1.0,
        le=3600.0,
        description="how long a claimed job stays hidden; a heartbeat renews it while the job runs",
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
    consolidation_lease_seconds: float = Field(
        120.0, ge=5.0, le=3600.0, description="per-user consolidation lease; renewed while the run lasts"
    )

    # --- API limits ----------------------------------------------------------------
    api_keys: str | None = Field(None, description="comma-separated key=tenant pairs")
    max_message_chars: int = Field(16_000, ge=1)
    max_messages_per_request: int = Field(100, ge=1)
    max_query_chars: int = Field(4_000, ge=1)
    max_top_k: int = Field(100, ge=1)
    max_body_bytes: int = Field(1_048_576, ge=1024)
    idempotency_expires_seconds: int = Field(
        3600, ge=1, description="how long an Idempotency-Key is remembered"
    )
    max_json_depth: int = Field(32, ge=4, le=512, description="deepest nesting of a JSON request body")
    earliest_time: datetime = Field(
        datetime(1900, 1, 1, tzinfo=UTC), description="earliest timestamp or date any request may carry"
    )
    latest_time: datetime = Field(
        datetime(2200, 1, 1, tzinfo=UTC), description="latest timestamp or date any request may carry"
    )
    sync_timeout_seconds: float | None = Field(
        None, gt=0, description="longest a sync=true request waits for its own jobs (unset: until done)"
    )

    storage_reserve_bytes: int = Field(
        16 * 1024 * 1024,
        ge=0,
        description="embedded: space kept back on the data volume so an erase works on a full disk (0: none)",
    )

    # --- memstack serve: connections (docs/reliability.md) ------------------------------
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

    # --- MCP server (memstack mcp, /mcp on memstack serve) -----------------------------
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

    # --- AWS -----------------------------------------------------------------------
    aws_region: str | None = None
    memories_table: str | None = None
    stm_table: str | None = None
    idempotency_table: str | None = None
    extraction_queue_url: str | None = None
    consolidation_queue_url: str | None = None
    # Dead-letter queues; unset means read from the source queue's RedrivePolicy.
    extraction_dlq_url: str | None = None
    consolidation_dlq_url: str | None = None
    # PostgreSQL + pgvector (store_backend=postgres): a direct DSN (psycopg) or the RDS Data API.
    postgres_executor: Literal["psycopg", "data-api"] = "psycopg"
    postgres_dsn: str | None = Field(None, description="libpq connection string (postgres_executor=psycopg)")
    postgres_cluster_arn: str | None = Field(None, description="Aurora cluster (postgres_executor=data-api)")
    postgres_secret_arn: str | None = Field(None, description="Secrets Manager secret of the database user")
    cursor_secret_arn: str | None = Field(
        None, description="Secrets Manager secret that keys list cursors (unset: <data dir>/cursor.key)"
    )
    postgres_database: str = "memstack"
    postgres_schema: str = Field("memstack", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    postgres_pool_size: int = Field(4, ge=1, le=100, description="most connections one process opens")
    postgres_connect_timeout: float = Field(10.0, gt=0)
    postgres_migrate_on_start: bool = Field(True, description="apply pending migrations when the store opens")
    postgres_exact_search_below: int = Field(
        2000, ge=0, description="rows per user below which vector search scans exactly instead of HNSW"
    )
    opensearch_endpoint: str | None = None
    opensearch_index: str = "memstack-memories"
    opensearch_service: Literal["es", "aoss"] = "es"
    opensearch_engine: Literal["faiss", "lucene"] = "faiss"
    opensearch_hnsw_m: int = Field(16, ge=2)
    opensearch_hnsw_ef_construction: int = Field(128, ge=2)
    opensearch_refresh: Literal["false", "true", "wait_for"] = Field(
        "wait_for", description="managed domains only: serverless collections refuse the parameter"
    )
    opensearch_visibility_seconds: float = Field(
        15.0, ge=0, description="serverless: how long a write takes to become searchable (erase waits it)"
    )
    bedrock_extraction_model: str = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    bedrock_synthesis_model: str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    bedrock_embedding_model: str = "amazon.titan-embed-text-v2:0"
    bedrock_rerank_model_arn: str | None = None
    bedrock_max_tokens: int = Field(1024, ge=1)
    bedrock_prompt_cache: Literal["auto", "true", "false"] = Field(
        "auto",
        description="cache points after the fixed system prompt and tool schema (auto: only for a model "
        "that takes them and caches a prefix that short)",
    )
    bedrock_temperature: float = Field(0.0, ge=0.0, le=1.0)
    # --- OpenAI-compatible LLM server (MEMSTACK_LLM=openai: OpenAI, vLLM, Ollama, llama.cpp, LM Studio)
    openai_base_url: str = Field("http://127.0.0.1:8080/v1", description="the server's /v1 root")
    openai_model: str = Field("gpt-4o-mini", min_length=1, description="extraction model")
    openai_synthesis_model: str | None = Field(None, description="consolidation model (default: the same)")
    openai_api_key: SecretStr | None = Field(None, description="sent as a Bearer token when set")
    openai_structured_output: StructuredOutput = Field(
        "auto", description="tools, response_format json_schema, or auto (tools, then json_schema)"
    )
    openai_timeout_seconds: float = Field(60.0, gt=0)
    openai_temperature: float = Field(0.0, ge=0.0, le=2.0)
    openai_max_tokens: int = Field(1024, ge=1)
    cost_report_threshold: float = Field(10.0, ge=0.0)
    alert_topic_arn: str | None = None
    project_tag: str = "memstack"
    tier_tag: str | None = Field(None, description="the Tier cost tag (the stack sets it); unset: all tiers")

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

    @field_validator("data_dir")
    @classmethod
    def _data_dir_is_a_directory(cls, value: Path) -> Path:
        # Said here, by name, rather than as "File exists" from the first mkdir.
        if value.exists() and not value.is_dir():
            raise ValueError(f"{value} is a file; it must be a directory (or not exist yet)")
        return value

    @model_validator(mode="after")
    def _check_consistency(self) -> Settings:
        if self.coarse_dim > self.embedding_dim:
            raise ValueError("coarse_dim must not exceed embedding_dim")
        if self.weight_vector + self.weight_bm25 <= 0:
            raise ValueError("weight_vector + weight_bm25 must be positive")
        return self

    @property
    def db_path(self) -> Path:
        return self.data_dir / "memstack.sqlite3"

    def api_key_map(self) -> dict[str, str]:
        """``MEMSTACK_API_KEYS`` as {key: tenant}; unset means the one dev key.

        The dev key's tenant is the CLI's (``MEMSTACK_DEFAULT_TENANT``): what ``memstack
        ingest`` wrote, ``memstack serve`` finds with ``dev-key``, and the other way round.
        """
        if not self.api_keys:
            return {"dev-key": self.default_tenant}
        pairs: dict[str, str] = {}
        for item in self.api_keys.split(","):
            key, sep, tenant = item.strip().partition("=")
            if not sep or not key or not tenant:
                raise SettingsError(f"MEMSTACK_API_KEYS: expected key=tenant pairs, got {item.strip()!r}")
            pairs[key] = tenant
        return pairs


def load_settings(**overrides: object) -> Settings:
    """Read the environment once; overrides win (tests and CLI flags use them)."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = ".".join(str(p) for p in err["loc"]) or "settings"
            name = f"MEMSTACK_{field.upper()}" if err["loc"] else "settings"
            problems.append(f"{name}: {err['msg']}")
        raise SettingsError("invalid configuration: " + "; ".join(problems)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (Lambda handlers and the CLI read them once)."""
    return load_settings()
