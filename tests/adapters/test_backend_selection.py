"""Choosing a store backend is one setting, and the whole service runs on the DynamoDB one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.opensearch.managed import ManagedDocuments
from memstack.adapters.opensearch.store import OpenSearchMemoryStore
from memstack.domain.retrieval.types import SearchRequest
from memstack.errors import SettingsError
from memstack.factory import build_service, build_store
from memstack.models import Message
from memstack.settings import load_settings
from moto import mock_aws

from ..conformance.conftest import TABLE, create_memories_table, dynamodb_client
from .opensearch_fake import Recorder, recording_client


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with mock_aws():
        client = dynamodb_client()
        create_memories_table(client)
        yield client


def test_the_service_ingests_and_searches_on_the_dynamodb_backend(tmp_path: Path, dynamodb: Any) -> None:
    settings = load_settings(
        data_dir=tmp_path, embedder="hashing", store_backend="dynamodb", memories_table=TABLE
    )
    service = build_service(settings, dynamodb=dynamodb)
    try:
        assert isinstance(service.store, DynamoDBMemoryStore)
        service.add(
            "t1",
            "u1",
            [
                Message(content="I adopted a golden retriever named Biscuit", speaker="Ana"),
                Message(content="My favourite food is ramen", speaker="Ana"),
            ],
            infer=False,
        )
        result = service.search(
            SearchRequest(tenant="t1", user_id="u1", query="what is the name of the retriever?")
        )
        assert result.hits and "Biscuit" in result.hits[0].record.content
        assert service.search(SearchRequest(tenant="t1", user_id="u2", query="dog")).hits == []
        assert service.erase_user("t1", "u1")["memories"] == 2
    finally:
        service.close()


def test_opensearch_is_chosen_by_setting_with_its_index_options(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path,
        embedder="hashing",
        store_backend="opensearch",
        opensearch_endpoint="search.example",
        opensearch_index="mem",
        opensearch_engine="lucene",
        opensearch_hnsw_m=32,
        opensearch_hnsw_ef_construction=200,
        opensearch_refresh="false",
        embedding_dim=256,
        coarse_dim=64,
    )
    store = build_store(settings, {"opensearch": recording_client(Recorder())})
    assert isinstance(store, OpenSearchMemoryStore)
    index = store.index
    assert (index.alias, index.engine, index.m, index.ef_construction, index.refresh) == (
        "mem",
        "lucene",
        32,
        200,
        "false",
    )
    assert isinstance(store.documents, ManagedDocuments)
    props = store.documents.template_body()["template"]["mappings"]["properties"]
    assert (props["embedding_full"]["dimension"], props["embedding_coarse"]["dimension"]) == (256, 64)


def test_a_backend_without_its_endpoint_or_table_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="MEMSTACK_OPENSEARCH_ENDPOINT"):
        build_store(load_settings(data_dir=tmp_path, store_backend="opensearch"), {})
    with pytest.raises(SettingsError, match="MEMSTACK_MEMORIES_TABLE"):
        build_store(load_settings(data_dir=tmp_path, store_backend="dynamodb"), {})


def test_the_signed_client_uses_the_requests_connection_for_es_and_aoss() -> None:
    from botocore.credentials import Credentials
    from memstack.adapters.opensearch.client import build_client
    from opensearchpy import AWSV4SignerAuth, RequestsHttpConnection

    creds = Credentials("AKIDEXAMPLE", "secret", "token")
    for service in ("es", "aoss"):
        client = build_client("search.example.com", service=service, region="eu-west-1", credentials=creds)
        connection = client.transport.connection_pool.connections[0]
        assert isinstance(connection, RequestsHttpConnection)
        auth = connection.session.auth
        assert isinstance(auth, AWSV4SignerAuth) and auth.service == service
        assert client.transport.max_retries == 0  # the store retries, with backoff
        signed = auth.signer.sign("GET", "https://search.example.com/_search", None)
        assert f"/eu-west-1/{service}/aws4_request" in signed["Authorization"]


def test_a_misspelt_client_is_refused_not_ignored(tmp_path: Path, dynamodb: Any) -> None:
    settings = load_settings(
        data_dir=tmp_path, embedder="hashing", store_backend="dynamodb", memories_table=TABLE
    )
    # "dynamo" would otherwise be dropped and the store would build its own client for the real AWS.
    with pytest.raises(TypeError, match=r"unknown client\(s\) \['dynamo'\].*'dynamodb'"):
        build_service(settings, dynamo=dynamodb)  # type: ignore[call-arg]


def test_every_provider_a_setting_can_name_is_registered_with_a_builder_in_its_module() -> None:
    """A new provider is its module and one registry line: the registries and the settings agree."""
    from typing import get_args

    from memstack.factory import EMBEDDERS, EXTRACTORS, LEASES, QUEUES, RERANKERS, STMS, STORES, SUMMARISERS
    from memstack.settings import EmbedderName, LlmName, QueueBackend, RerankerName, StmBackend, StoreBackend

    assert EMBEDDERS.names() == set(get_args(EmbedderName))
    assert RERANKERS.names() == set(get_args(RerankerName)) - {"none"}
    assert EXTRACTORS.names() == SUMMARISERS.names() == set(get_args(LlmName))
    assert STORES.names() == set(get_args(StoreBackend)) - {"embedded"}  # opened beside the STM
    assert STMS.names() == LEASES.names() == set(get_args(StmBackend))
    assert QUEUES.names() == set(get_args(QueueBackend))
    for registry in (EMBEDDERS, RERANKERS, EXTRACTORS, SUMMARISERS, STORES, STMS, LEASES, QUEUES):
        for name in registry.names():
            assert callable(registry.builder(name)), (registry.kind, name)


def test_a_name_no_registry_holds_is_refused_saying_what_it_is() -> None:
    from memstack.factory import STORES

    with pytest.raises(NotImplementedError, match="store backend 'embedded' is not available in this build"):
        STORES.build("embedded", load_settings(), {}, None)


def test_each_registered_provider_builds_what_its_name_says(tmp_path: Path) -> None:
    from memstack.adapters.embedders.hashing import HashingEmbedder
    from memstack.adapters.llm.providers.bedrock_extractor import BedrockExtractor
    from memstack.adapters.llm.providers.bedrock_summariser import BedrockSummariser
    from memstack.adapters.llm.rules.extractive_summariser import ExtractiveSummariser
    from memstack.adapters.llm.rules.extractor import RuleExtractor
    from memstack.adapters.rerankers.bedrock import BedrockReranker
    from memstack.factory import build_embedder, build_extractor, build_reranker, build_summariser

    local = load_settings(data_dir=tmp_path, embedder="hashing", embedding_dim=256)
    embedder = build_embedder(local)
    assert isinstance(embedder, HashingEmbedder) and embedder.dim == 256
    assert isinstance(build_extractor(local, embedder=embedder), RuleExtractor)
    assert isinstance(build_summariser(local), ExtractiveSummariser)
    assert build_reranker(local) is None
    arn = "arn:aws:bedrock:us-east-1::foundation-model/amazon.rerank-v1:0"
    aws = load_settings(
        data_dir=tmp_path,
        llm="bedrock",
        reranker="bedrock",
        aws_region="us-east-1",
        bedrock_rerank_model_arn=arn,
    )
    client = object()
    extractor = build_extractor(aws, client)
    assert isinstance(extractor, BedrockExtractor) and extractor.client is client
    assert isinstance(build_summariser(aws, client), BedrockSummariser)
    assert isinstance(build_reranker(aws, client), BedrockReranker)
