"""Reading and writing tenants' configurations, with a short cache for the hot paths.

Extraction (every message), filters (every listing and search naming a
category) and retrieval read a tenant's configuration; the store is read at
most once per tenant per ``ttl_seconds`` in a process. A write through this
process replaces its cached copy at once; another process (another Lambda
container, another ``memstack serve`` worker) sees the change within
``ttl_seconds``. The API's own ``GET /v1/config`` always reads the store.

Writes are a compare-and-set on the stored version (``ports.tenant_config``):
with ``if_version`` (the API's ``If-Match``) a changed document is refused
with 412; without it, a write that lost a race is retried on the new version
(``patch`` applies its patch to what is stored now), so no change is lost.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstack.domain.tenant.config import TenantConfig, merge_patch
from memstack.errors import Conflict, PreconditionFailed, ValidationFailed
from memstack.ports.tenant_config import TenantConfigStore

#: how long a process trusts its copy of a tenant's configuration (seconds)
CACHE_SECONDS = 15.0
#: tenants whose configuration one process keeps at once
CACHE_TENANTS = 1024
#: compare-and-set attempts of a write without ``if_version`` before it gives up with 409
_WRITE_ATTEMPTS = 5


@dataclass(frozen=True)
class VersionedConfig:
    config: TenantConfig
    version: int
    updated_at: datetime | None


class TenantConfigs:
    """Tenants' configurations: cached reads for the hot paths, checked and versioned writes."""

    def __init__(
        self,
        store: TenantConfigStore,
        *,
        ttl_seconds: float = CACHE_SECONDS,
        max_tenants: int = CACHE_TENANTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.ttl_seconds = ttl_seconds
        self.max_tenants = max_tenants
        self.clock = clock
        self._cache: OrderedDict[str, tuple[float, VersionedConfig]] = OrderedDict()
        self._lock = threading.Lock()

    def current(self, tenant: str) -> TenantConfig:
        """The tenant's configuration as the hot paths read it (at most ``ttl_seconds`` old)."""
        now = self.clock()
        with self._lock:
            cached = self._cache.get(tenant)
            if cached is not None and cached[0] > now:
                self._cache.move_to_end(tenant)
                return cached[1].config
        return self.read(tenant).config

    def read(self, tenant: str) -> VersionedConfig:
        """The stored configuration (a consistent read), which also refreshes the cache."""
        stored = self.store.get(tenant)
        return self._remember(
            tenant,
            VersionedConfig(TenantConfig.from_stored(stored.document), stored.version, stored.updated_at),
        )

    def replace(
        self, tenant: str, document: Any, now: datetime, *, if_version: int | None = None
    ) -> VersionedConfig:
        """Store ``document`` as the whole configuration (checked: ``ValidationFailed`` says why not)."""
        config = TenantConfig.checked(document)
        return self._write(tenant, lambda _current: config, now, if_version)

    def patch(
        self, tenant: str, patch: Any, now: datetime, *, if_version: int | None = None
    ) -> VersionedConfig:
        """Apply a JSON merge patch (RFC 7386) to the stored configuration, then check the result."""
        if not isinstance(patch, dict):
            raise ValidationFailed("a merge patch must be a JSON object of sections")
        return self._write(
            tenant,
            lambda current: TenantConfig.checked(merge_patch(current.stored(), patch)),
            now,
            if_version,
        )

    def _write(
        self,
        tenant: str,
        change: Callable[[TenantConfig], TenantConfig],
        now: datetime,
        if_version: int | None,
    ) -> VersionedConfig:
        for _ in range(_WRITE_ATTEMPTS):
            current = self.read(tenant)
            if if_version is not None and current.version != if_version:
                raise PreconditionFailed(
                    f"the configuration is at version {current.version}, not {if_version} (If-Match); "
                    "read it again and reapply your change"
                )
            config = change(current.config)
            try:
                stored = self.store.put(tenant, config.stored(), current.version, now)
            except Conflict:
                if if_version is not None:
                    raise PreconditionFailed(
                        f"the configuration changed while this write ran (it was version {if_version}); "
                        "read it again and reapply your change"
                    ) from None
                continue
            return self._remember(tenant, VersionedConfig(config, stored.version, stored.updated_at))
        raise Conflict("the configuration kept changing under this write; retry it")

    def _remember(self, tenant: str, versioned: VersionedConfig) -> VersionedConfig:
        with self._lock:
            self._cache[tenant] = (self.clock() + self.ttl_seconds, versioned)
            self._cache.move_to_end(tenant)
            while len(self._cache) > self.max_tenants:
                self._cache.popitem(last=False)
        return versioned
