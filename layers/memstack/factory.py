"""Builds a ``MemoryService`` from ``Settings``: one place that knows which adapter is which.

Adapters are imported lazily, so a Lambda that uses DynamoDB never imports
torch and the laptop never needs opensearch-py. Tests pass ready-made
adapters (fakes, moto clients) through the keyword arguments.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict, Unpack, cast

from memstack.adapters.blas import limit_blas_threads
from memstack.domain.cursors import CursorSigner
from memstack.domain.embedder_record import check_embedder
from memstack.domain.embedding_memo import memoised
from memstack.domain.extraction.handler import ExtractionJobHandler
from memstack.domain.ingest import Ingestor, UnitOfWork
from memstack.domain.jobs import JobRecorder
from memstack.domain.tenant.configs import TenantConfigs
from memstack.domain.time.bounds import TimeBounds
from memstack.logs import configure_logging
from memstack.ports.embedder import Embedder
from memstack.ports.job_status import JobStatuses
from memstack.ports.lease import Leases
from memstack.ports.llm import Extractor, Summariser
from memstack.ports.queue import JobQueue
from memstack.ports.reranker import Reranker
from memstack.ports.stm import ErasureLog, ShortTermStore
from memstack.ports.store import MemoryStore
from memstack.ports.tenant_config import TenantConfigHost
from memstack.registry import Registry
from memstack.service import MemoryService
from memstack.settings import Settings

if TYPE_CHECKING:
    from memstack.domain.consolidation.job import Consolidator
    from memstack.domain.consolidation.profiles import ProfileBuilder
    from memstack.domain.retrieval.pipeline import Retriever

# The edges' one logging set-up (memstack.logs), as soon as anything that builds a service is imported,
# so it is the memstack logger's first configuration in every process; the domain only logs.
configure_logging()


#: embedders by ``MEMSTACK_EMBEDDER`` (a builder ``(settings, clients)`` in the provider's module)
EMBEDDERS: Registry[Embedder] = Registry(
    "embedder",
    {
        "hashing": "memstack.adapters.embedders.hashing:build",
        "minilm": "memstack.adapters.embedders.minilm:build",
        "mpnet": "memstack.adapters.embedders.mpnet:build",
        "bedrock-titan": "memstack.adapters.embedders.bedrock:build_titan",
        "bedrock-cohere": "memstack.adapters.embedders.bedrock:build_cohere",
    },
)
#: rerankers by ``MEMSTACK_RERANKER`` (``none``: no reranker); builders ``(settings, clients)``
RERANKERS: Registry[Reranker] = Registry("reranker", {"bedrock": "memstack.adapters.rerankers.bedrock:build"})
#: extraction models by ``MEMSTACK_LLM``; builders ``(settings, clients, embedder)``
EXTRACTORS: Registry[Extractor] = Registry(
    "llm",
    {
        "local": "memstack.adapters.llm.rules.extractor:build",
        "bedrock": "memstack.adapters.llm.providers.bedrock_extractor:build",
        "openai": "memstack.adapters.llm.providers.openai_provider:build_extractor",
    },
)
#: consolidation's summarisers by ``MEMSTACK_LLM``; builders ``(settings, clients)``
SUMMARISERS: Registry[Summariser] = Registry(
    "llm",
    {
        "local": "memstack.adapters.llm.rules.extractive_summariser:build",
        "bedrock": "memstack.adapters.llm.providers.bedrock_summariser:build",
        "openai": "memstack.adapters.llm.providers.openai_provider:build_summariser",
    },
)
#: memory stores by ``MEMSTACK_STORE_BACKEND`` other than ``embedded`` (which shares the SQLite file
#: with the STM and the queue, so ``build_service`` opens it); builders ``(settings, clients, stm)``
STORES: Registry[MemoryStore] = Registry(
    "store backend",
    {
        "dynamodb": "memstack.adapters.dynamodb.store:build",
        "postgres": "memstack.adapters.postgres.store:build",
        "opensearch": "memstack.adapters.opensearch.store:build",
    },
)


#: short-term stores by ``MEMSTACK_STM_BACKEND``; builders ``(settings, clients, db)`` (``db``: the SQLite
#: file when one is open)
STMS: Registry[ShortTermStore] = Registry(
    "STM backend",
    {
        "embedded": "memstack.adapters.embedded.stm:build",
        "dynamodb": "memstack.adapters.dynamodb.stm:build",
    },
)
#: per-user leases, kept beside the STM (by ``MEMSTACK_STM_BACKEND``); builders ``(settings, clients, db)``
LEASES: Registry[Leases] = Registry(
    "STM backend",
    {
        "embedded": "memstack.adapters.embedded.leases:build",
        "dynamodb": "memstack.adapters.dynamodb.leases:build",
    },
)
#: each job's state, kept beside the STM (by ``MEMSTACK_STM_BACKEND``); builders ``(settings, clients, db)``
JOB_STATUSES: Registry[JobStatuses] = Registry(
    "STM backend",
    {
        "embedded": "memstack.adapters.embedded.job_status:build",
        "dynamodb": "memstack.adapters.dynamodb.job_status:build",
    },
)
#: job queues by ``MEMSTACK_QUEUE_BACKEND``; builders ``(settings, clients, db)``
QUEUES: Registry[JobQueue] = Registry(
    "queue backend",
    {
        "local": "memstack.adapters.queue.sqlite:build",
        "sqs": "memstack.adapters.queue.sqs:build",
    },
)


def build_embedder(settings: Settings, client: Any | None = None) -> Embedder:
    """The embedder the settings name; ``client`` is a bedrock-runtime client (tests pass a stubbed one)."""
    return EMBEDDERS.build(settings.embedder, settings, {"bedrock_runtime": client})


def build_reranker(settings: Settings, client: Any | None = None) -> Reranker | None:
    """The reranker the settings name; ``client`` is a bedrock-agent-runtime client."""
    if settings.reranker == "none":
        return None
    return RERANKERS.build(settings.reranker, settings, {"bedrock_agent_runtime": client})


def build_extractor(
    settings: Settings,
    client: Any | None = None,
    http_client: Any | None = None,
    embedder: Embedder | None = None,
) -> Extractor:
    """The extraction model: rule-based offline (linking changes by meaning with ``embedder``),
    Bedrock Converse (``client``: bedrock-runtime), or an OpenAI-compatible server (``http_client``:
    an ``httpx.Client``)."""
    clients = {"bedrock_runtime": client, "openai_http": http_client}
    return EXTRACTORS.build(settings.llm, settings, clients, embedder)


def cursor_key(settings: Settings, client: object = None) -> bytes:
    """The deployment's cursor key: its Secrets Manager secret, or the data directory's key file."""
    from memstack.adapters import cursor_key as keys

    if settings.aws.cursor_secret_arn:
        return keys.secrets_manager_key(settings.aws.cursor_secret_arn, client, settings.aws.aws_region)
    return keys.local_key(settings.data_dir)


def shared_transaction(store: object, stm: object) -> UnitOfWork | None:
    """One transaction for an add's writes when the store and the STM are the one SQLite file."""
    db: Any = getattr(store, "db", None)
    shared = db is not None and db is getattr(stm, "db", None)
    return cast(UnitOfWork, db.write) if shared else None


def time_bounds(settings: Settings) -> TimeBounds:
    return TimeBounds(settings.api.earliest_time, settings.api.latest_time)


def extraction_handler(
    settings: Settings,
    store: MemoryStore,
    stm: ShortTermStore,
    embedder: Embedder,
    extractor: Extractor,
    configs: TenantConfigs | None = None,
) -> ExtractionJobHandler:
    """The "extract" job; ``configs`` gives each tenant's categories and instructions (built-in without)."""
    config = settings.extraction.model_copy(
        update={
            "time_bounds": time_bounds(settings),
            "turn_vector_reusable": not settings.ingest.indexing.context_in_embedding,
        }
    )
    return ExtractionJobHandler(store, stm, embedder, extractor, config, configs.current if configs else None)


def build_summariser(
    settings: Settings, client: Any | None = None, http_client: Any | None = None
) -> Summariser:
    """Consolidation's summariser: extractive offline, Bedrock Converse, or an OpenAI-compatible server."""
    return SUMMARISERS.build(settings.llm, settings, {"bedrock_runtime": client, "openai_http": http_client})


def build_store(settings: Settings, clients: Clients, stm: ShortTermStore | None = None) -> MemoryStore:
    """The ``dynamodb``, ``postgres`` or ``opensearch`` store.

    ``clients`` may hold ready-made ``dynamodb``, ``rds_data`` or ``opensearch`` clients;
    ``stm`` is the short-term store, whose erasure log fences a serverless collection.
    """
    return STORES.build(settings.store_backend, settings, clients, stm)


def build_tenant_configs(store: MemoryStore, db: Any) -> TenantConfigs:
    """Tenants' configurations where the memory store keeps them (its table, database, cluster or
    SQLite file); beside a store that keeps none, in the SQLite file of the STM or queue."""
    if isinstance(store, TenantConfigHost):
        return TenantConfigs(store.tenant_config_store())
    from memstack.adapters.embedded.tenant_config import EmbeddedTenantConfigStore

    if db is None:
        raise NotImplementedError(
            f"{type(store).__name__} keeps no tenant configuration and no SQLite file is open"
        )
    return TenantConfigs(EmbeddedTenantConfigStore(db))


def build_job_recorder(settings: Settings, db: Any, clients: Clients) -> JobRecorder:
    """Job status beside the short-term store (its DynamoDB table, or the SQLite file), with its TTL."""
    statuses = JOB_STATUSES.build(settings.stm_backend, settings, clients, db)
    return JobRecorder(statuses, timedelta(seconds=settings.queue.job_status_ttl_seconds))


def build_leases(settings: Settings, db: Any, clients: Clients) -> Leases:
    """Per-user leases beside the short-term store: its DynamoDB table, or the SQLite file."""
    return LEASES.build(settings.stm_backend, settings, clients, db)


class Clients(TypedDict, total=False):
    """Ready-made clients and models ``build_service`` takes instead of building its own (tests, Lambdas).

    Typed, so a misspelt name is a type error, and checked at run time, so it is never silently ignored.
    """

    dynamodb: Any
    s3: Any
    rds_data: Any
    opensearch: Any
    sqs: Any
    secretsmanager: Any
    bedrock_runtime: Any
    bedrock_agent_runtime: Any
    openai_http: Any
    extractor: Extractor
    summariser: Summariser


def build_service(
    settings: Settings,
    *,
    store: MemoryStore | None = None,
    stm: ShortTermStore | None = None,
    embedder: Embedder | None = None,
    queue: JobQueue | None = None,
    reranker: Reranker | None = None,
    embedder_check: bool = True,
    **clients: Unpack[Clients],
) -> MemoryService:
    """The service the settings describe.

    ``embedder_check``: refuse a store whose vectors another embedder made
    (``domain/embedder_record.py``); off only for ``memstack reembed``, which mends that.
    """
    unknown = sorted(set(clients) - set(Clients.__annotations__))
    if unknown:
        raise TypeError(
            f"build_service() got unknown client(s) {unknown}; known: {sorted(Clients.__annotations__)}"
        )
    limit_blas_threads(settings.embedding.blas_threads)
    closers = []
    db = None
    reserve = None
    if (
        settings.store_backend == "embedded"
        or settings.stm_backend == "embedded"
        or (settings.queue_backend == "local" and queue is None)
    ):
        from memstack.adapters.embedded.database import Database
        from memstack.adapters.embedded.reserve import StorageReserve

        db = Database(settings.db_path)
        closers.append(db.close)
        reserve = StorageReserve(settings.data_dir, settings.server.storage_reserve_bytes)
        reserve.refill()
    if stm is None:
        stm = STMS.build(settings.stm_backend, settings, clients, db)
    if store is None and settings.store_backend != "embedded":
        store = build_store(settings, clients, stm)
        closers.append(store.close)
    if store is None:
        from memstack.adapters.embedded.store import EmbeddedMemoryStore

        assert db is not None
        store = EmbeddedMemoryStore(db)
    if queue is None:
        queue = QUEUES.build(settings.queue_backend, settings, clients, db)
    # Beside the STM: in its own SQLite file when one was passed in. Another Database on that file
    # would have its own write lock, and a state recorded while the caller's transaction is open
    # waited on it until SQLite's busy timeout (a 503).
    recorder = build_job_recorder(settings, getattr(stm, "db", None) or db, clients)
    if getattr(queue, "recorder", False) is None:  # our queues report each job's state to it
        queue.recorder = recorder  # type: ignore[attr-defined]
    embedder = embedder or memoised(
        build_embedder(settings, clients.get("bedrock_runtime")), settings.embedding.embedding_memo
    )
    if reranker is None:
        reranker = build_reranker(settings, clients.get("bedrock_agent_runtime"))
    ingestor = Ingestor(
        store,
        stm,
        embedder,
        settings.ingest.model_copy(update={"time_bounds": time_bounds(settings)}),
        queue,
        unit=shared_transaction(store, stm),
    )

    def make_retriever() -> Retriever:
        from memstack.domain.retrieval.pipeline import Retriever

        return Retriever(store, embedder, settings.retrieval, reranker)

    tenant_configs = build_tenant_configs(store, db)
    extractor = clients.get("extractor") or build_extractor(
        settings, clients.get("bedrock_runtime"), clients.get("openai_http"), embedder
    )
    summariser = clients.get("summariser") or build_summariser(
        settings, clients.get("bedrock_runtime"), clients.get("openai_http")
    )

    # Consolidation and profiles are built on the first consolidation: only the consolidation
    # worker (and a local service) runs one; the API and the other workers never import them.
    def make_consolidator() -> Consolidator:
        from memstack.domain.consolidation.job import Consolidator

        consolidator = Consolidator(
            store,
            stm,
            embedder,
            summariser,
            settings.consolidation,
            leases=service.leases,
            configs=tenant_configs.current,
        )
        if service.webhooks is not None:
            consolidator.on_written = service.webhooks.memories_written
        return consolidator

    def make_profiles() -> ProfileBuilder:
        from memstack.domain.consolidation.profiles import ProfileBuilder

        profiles = ProfileBuilder(store, embedder, settings.profiles)
        if service.webhooks is not None:
            profiles.on_written = service.webhooks.memories_written
        return profiles

    extract = extraction_handler(settings, store, stm, embedder, extractor, tenant_configs)
    service = MemoryService(
        cursors=CursorSigner(lambda: cursor_key(settings, clients.get("secretsmanager"))),
        settings=settings,
        store=store,
        stm=stm,
        embedder=embedder,
        ingestor=ingestor,
        make_retriever=make_retriever,
        queue=queue,
        job_handlers={"extract": extract},
        closers=closers,
        make_consolidator=make_consolidator,
        leases=build_leases(settings, db, clients),
        make_profiles=make_profiles if settings.profiles.enabled else None,
        reserve=reserve,
        tenant_configs=tenant_configs,
        job_recorder=recorder,
    )
    if embedder_check:
        try:
            check_embedder(service.tenant_configs.store, embedder, datetime.now(UTC))
        except BaseException:
            service.close()
            raise
    if queue is not None:
        wire_webhooks(service, settings, queue, extract)
        queue.set_handler(service.process_job)
    return service


def wire_webhooks(
    service: MemoryService, settings: Settings, queue: JobQueue, extract: ExtractionJobHandler
) -> None:
    """Events from where memories are written and jobs fail, and the ``webhook`` job that delivers them."""
    from memstack.adapters.webhooks.http_sender import PinnedHttpSender
    from memstack.domain.webhooks.delivery import WebhookDelivery
    from memstack.domain.webhooks.publisher import WebhookPublisher

    publisher = WebhookPublisher(service.tenant_configs, queue)
    service.webhooks = publisher
    # (the consolidator and the profile builder, built later, take it from ``service.webhooks``)
    extract.on_written = publisher.memories_written
    if service.job_recorder is not None:
        service.job_recorder.on_failed.append(publisher.job_failed)
    hooks = settings.webhooks
    sender = PinnedHttpSender(hooks.allowed_hosts(), hooks.webhook_timeout_seconds)
    service.closers.append(sender.close)
    erasures = service.stm if isinstance(service.stm, ErasureLog) else None
    service.job_handlers["webhook"] = WebhookDelivery(service.tenant_configs, sender, erasures)
