"""Tenants' configurations in OpenSearch: index ``<alias>-config``, one document per tenant.

The document carries ``tenant_key`` (a hash of the tenant: no tenant name in
an id), the tenant, ``version``, ``updated_at`` and ``document_json`` (the
configuration as JSON text, so no tenant's sections ever add fields to the
mapping).

- Managed domain (``OpenSearchTenantConfigStore``): the document's ``_id`` is
  the ``tenant_key``; reads are a realtime ``GET``; the first write is
  ``op_type=create`` and later ones are conditioned on the ``_seq_no`` /
  ``_primary_term`` read with the version (409: another write won).
- Serverless collection (``ServerlessTenantConfigStore``): no ``_id`` writes,
  no realtime read, no refresh. Each write indexes a new copy (bulk, the
  collection assigns its id) and deletes the copies it saw; a read searches
  the tenant's copies and takes the highest version. A collection makes a
  write searchable only after its refresh (seconds), so the store remembers
  what this process wrote last and never answers older than that; and it has
  no compare-and-set, so two processes writing within that window can both
  land, and the later version read wins (docs/operations.md).
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime
from typing import Any

from memstack.adapters.opensearch.index import OpenSearchIndex, status_of
from memstack.errors import Conflict, DependencyFailed
from memstack.ports.tenant_config import NO_CONFIG, StoredConfig

_OK = (200, 201)
#: copies of one tenant's document a serverless read looks at (a write deletes the older ones it sees)
_COPIES = 20


def tenant_key(tenant: str) -> str:
    return hashlib.sha256(("tenant-config\x1f" + tenant).encode()).hexdigest()


def _source(tenant: str, document: dict[str, Any], version: int, now: datetime) -> dict[str, Any]:
    return {
        "tenant_key": tenant_key(tenant),
        "tenant": tenant,
        "version": version,
        "updated_at": now.isoformat(),
        "document_json": json.dumps(document, ensure_ascii=False, separators=(",", ":")),
    }


def _stored(source: dict[str, Any]) -> StoredConfig:
    return StoredConfig(
        document=json.loads(source["document_json"]),
        version=int(source["version"]),
        updated_at=datetime.fromisoformat(source["updated_at"]),
    )


class OpenSearchTenantConfigStore:
    """On a managed domain, beside the memory index ``index`` (its client, retries and name)."""

    def __init__(self, index: OpenSearchIndex) -> None:
        self.index = index
        self.name = f"{index.alias}-config"

    @property
    def client(self) -> Any:
        return self.index.client

    def _read(self, tenant: str) -> dict[str, Any] | None:
        try:
            got = self.index.call(
                "read configuration", self.client.get, expect=(404,), index=self.name, id=tenant_key(tenant)
            )
        except Exception as exc:
            if status_of(exc) == 404:  # none written, or no configuration ever (no index yet)
                return None
            raise
        if not isinstance(got, dict) or not got.get("found") or got["_source"].get("tenant") != tenant:
            return None
        return got

    def get(self, tenant: str) -> StoredConfig:
        got = self._read(tenant)
        return NO_CONFIG if got is None else _stored(got["_source"])

    def put(
        self, tenant: str, document: dict[str, Any], expected_version: int, now: datetime
    ) -> StoredConfig:
        guard: dict[str, Any] = {"op_type": "create"}
        if expected_version:
            got = self._read(tenant)
            if got is None or int(got["_source"]["version"]) != expected_version:
                raise Conflict(f"the configuration is no longer at version {expected_version}")
            guard = {"if_seq_no": got["_seq_no"], "if_primary_term": got["_primary_term"]}
        try:
            self.index.call(
                "write configuration",
                self.client.index,
                expect=(409,),
                index=self.name,
                id=tenant_key(tenant),
                body=_source(tenant, document, expected_version + 1, now),
                refresh="true",
                **guard,
            )
        except Exception as exc:
            if status_of(exc) == 409:
                raise Conflict(f"the configuration is no longer at version {expected_version}") from exc
            raise
        return StoredConfig(document=document, version=expected_version + 1, updated_at=now)


class ServerlessTenantConfigStore(OpenSearchTenantConfigStore):
    """On a serverless collection: copies with versions, no ``_id`` writes (see the module docstring)."""

    MAPPINGS = {
        "properties": {
            "tenant_key": {"type": "keyword"},
            "tenant": {"type": "keyword", "index": False},
            "version": {"type": "long"},
            "updated_at": {"type": "keyword", "index": False},
            "document_json": {"type": "text", "index": False},
        }
    }

    def __init__(self, index: OpenSearchIndex) -> None:
        super().__init__(index)
        self._ready = False
        self._written: dict[str, StoredConfig] = {}
        self._lock = threading.Lock()

    def _ensure(self) -> None:
        if self._ready:
            return
        if not self.index.call("check configuration index", self.client.indices.exists, index=self.name):
            try:
                self.index.call(
                    "create configuration index",
                    self.client.indices.create,
                    expect=(400,),
                    index=self.name,
                    body={"mappings": self.MAPPINGS},
                )
            except Exception as exc:
                if "resource_already_exists" not in str(exc):
                    raise DependencyFailed(f"OpenSearch create index failed: {exc}") from exc
        self._ready = True

    def _copies(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's copies, highest version first (the collection's view: a refresh behind)."""
        self._ensure()
        found = self.index.call(
            "read configuration",
            self.client.search,
            index=self.name,
            body={
                "size": _COPIES,
                "query": {"term": {"tenant_key": tenant_key(tenant)}},
                "sort": [{"version": "desc"}],
            },
        )
        hits = (found.get("hits") or {}).get("hits") or [] if isinstance(found, dict) else []
        return [h for h in hits if h.get("_source", {}).get("tenant") == tenant]

    def _latest(self, tenant: str, copies: list[dict[str, Any]]) -> StoredConfig:
        seen = _stored(copies[0]["_source"]) if copies else NO_CONFIG
        with self._lock:
            mine = self._written.get(tenant)
        return mine if mine is not None and mine.version > seen.version else seen

    def get(self, tenant: str) -> StoredConfig:
        return self._latest(tenant, self._copies(tenant))

    def put(
        self, tenant: str, document: dict[str, Any], expected_version: int, now: datetime
    ) -> StoredConfig:
        copies = self._copies(tenant)
        if self._latest(tenant, copies).version != expected_version:
            raise Conflict(f"the configuration is no longer at version {expected_version}")
        stored = StoredConfig(document=document, version=expected_version + 1, updated_at=now)
        ops = [
            ({"index": {"_index": self.name}}, _source(tenant, document, stored.version, now)),
            *(({"delete": {"_index": self.name, "_id": c["_id"]}}, None) for c in copies),
        ]
        results = self.index.bulk(ops)
        if results[0].get("status") not in _OK:
            reason = (results[0].get("error") or {}).get("reason", "unknown error")
            raise DependencyFailed(f"OpenSearch rejected the configuration: {reason}")
        with self._lock:
            self._written[tenant] = stored
        return stored
