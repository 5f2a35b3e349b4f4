"""The tenant configuration port on every backend: versioned compare-and-set, one document per tenant."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from memstack.errors import Conflict
from memstack.ports.tenant_config import TenantConfigHost

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 3, 1, 12, 5, tzinfo=UTC)
DOC = {"categories": {"custom": [{"name": "pets", "description": "pets — chiens, 猫", "keywords": ["dog"]}]}}


def test_first_write_then_compare_and_set(store: Any) -> None:
    assert isinstance(store, TenantConfigHost)
    configs = store.tenant_config_store()
    empty = configs.get("acme")
    assert (empty.document, empty.version, empty.updated_at) == ({}, 0, None)

    first = configs.put("acme", DOC, 0, T0)
    assert first.version == 1
    got = configs.get("acme")
    assert (got.document, got.version, got.updated_at) == (DOC, 1, T0)

    # A second "first write" lost the race: refused, nothing changed.
    with pytest.raises(Conflict):
        configs.put("acme", {"extraction": {"instructions": "x"}}, 0, T1)
    assert configs.get("acme").document == DOC

    second = configs.put("acme", {"extraction": {"instructions": "never store health data"}}, 1, T1)
    assert second.version == 2
    # A write based on version 1 is stale now.
    with pytest.raises(Conflict):
        configs.put("acme", {}, 1, T1)
    got = configs.get("acme")
    assert (got.document, got.version, got.updated_at) == (
        {"extraction": {"instructions": "never store health data"}},
        2,
        T1,
    )


def test_tenants_never_see_or_change_each_other(store: Any) -> None:
    configs = store.tenant_config_store()
    configs.put("acme", DOC, 0, T0)
    # Another tenant starts from nothing, and its versions are its own.
    assert configs.get("globex").version == 0
    assert configs.get("acme#").version == 0  # no tenant's key is a prefix game on another's
    configs.put("globex", {"extraction": {"instructions": "g"}}, 0, T1)
    with pytest.raises(Conflict):
        configs.put("globex", {}, 0, T1)
    assert configs.get("acme").document == DOC and configs.get("acme").version == 1
    assert configs.get("globex").document == {"extraction": {"instructions": "g"}}


def test_the_configuration_is_no_user_data(store: Any) -> None:
    """Erasing a user leaves the tenant's configuration; the user listing never shows it."""
    configs = store.tenant_config_store()
    configs.put("acme", DOC, 0, T0)
    store.erase_user("acme", "alice")
    assert configs.get("acme").document == DOC
    users, _ = store.users("acme", 10)
    assert users == []
