"""The tenant configuration port: one JSON document per tenant, versioned, replaced whole.

The store keeps the document as an opaque JSON object: what its sections mean
(custom categories, extraction instructions, ...) is the domain's
(``memstack.domain.tenant.config``), so a new section needs no store change.
Every call takes the tenant (from the caller's credential), and no call can
read or change another tenant's document.

``put`` is a compare-and-set on the version: ``expected_version`` 0 means
"there is no document yet"; the stored version then becomes
``expected_version + 1``. A mismatch raises ``Conflict`` and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class StoredConfig:
    """A tenant's document as stored: version 0 (and no time) when none was ever written."""

    document: dict[str, Any]
    version: int
    updated_at: datetime | None


#: what ``get`` answers for a tenant that never wrote a configuration
NO_CONFIG = StoredConfig(document={}, version=0, updated_at=None)


class TenantConfigStore(Protocol):
    def get(self, tenant: str) -> StoredConfig:
        """The tenant's document (``NO_CONFIG``'s shape, version 0, when there is none); a consistent read."""
        ...

    def put(
        self, tenant: str, document: dict[str, Any], expected_version: int, now: datetime
    ) -> StoredConfig:
        """Store ``document`` as version ``expected_version + 1`` if the stored version is still
        ``expected_version`` (0: none stored); else raise ``Conflict`` and change nothing."""
        ...


@runtime_checkable
class TenantConfigHost(Protocol):
    """A memory store that keeps tenants' configurations beside the memories (every backend does)."""

    def tenant_config_store(self) -> TenantConfigStore: ...
