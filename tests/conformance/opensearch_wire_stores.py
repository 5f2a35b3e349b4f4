"""Both OpenSearch flavours on the recorded wire (tests/infra/opensearch_wire.py): the real store and
opensearch-py client, their requests answered in memory as OpenSearch would, so a case runs without a
cluster and can read the exact requests the store sent (``Wire.recorder``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.infra.opensearch_wire import Wire

from .conftest import COARSE_DIM, FULL_DIM

#: the memories' alias on the wire (its configurations are in ``<alias>-config``)
WIRE_ALIAS = "memstack-erase"


def opensearch_wire(tmp_path: Path, wire: Wire | None = None) -> Iterator[Any]:
    """A managed-domain store answered by ``wire`` (a new one by default)."""
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore

    store = OpenSearchMemoryStore.managed(
        (wire or Wire()).client(), alias=WIRE_ALIAS, embedding_dim=FULL_DIM, coarse_dim=COARSE_DIM
    )
    yield store
    store.close()


class StmFirst:
    """The serverless store as the service erases it: the STM (which writes the erasure marker)
    first, then the store (``MemoryService._erase``)."""

    def __init__(self, store: Any, stm: Any) -> None:
        self._store, self._stm = store, stm

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def erase_user(self, tenant: str, user_id: str) -> dict[str, int]:
        self._stm.erase_user(tenant, user_id)
        return self._store.erase_user(tenant, user_id)


def opensearch_serverless_wire(tmp_path: Path, wire: Wire | None = None) -> Iterator[Any]:
    """A serverless-collection store answered by ``wire``, fenced by a DynamoDB STM's erasure log (moto)."""
    import boto3
    from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore, create_stm_table
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_stm_table(client, "stm")
        stm = DynamoDbShortTermStore("stm", client=client)
        store = OpenSearchMemoryStore.serverless(
            (wire or Wire()).client(),
            alias=WIRE_ALIAS,
            embedding_dim=FULL_DIM,
            coarse_dim=COARSE_DIM,
            visibility_seconds=0.0,
            erasure_log=stm,
            sleep=lambda _: None,
        )
        yield StmFirst(store, stm)
        store.close()


#: both flavours on the recorded wire, by the names the conformance fixtures give them
WIRED = {"opensearch-wire": opensearch_wire, "opensearch-serverless-wire": opensearch_serverless_wire}
