"""The OpenSearch role-mapping custom resource's logic, with the HTTP sender injected."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from memstack.adapters.opensearch.permissions import domain_role

from stacks.constructs.search import domain_role_property

HANDLER = Path(__file__).resolve().parents[2] / "stacks" / "handlers" / "opensearch_role_mapping" / "index.py"
ENDPOINT = "https://search-memstack.us-east-1.es.amazonaws.com"
ROLES = [
    "arn:aws:iam::123456789012:role/worker",
    "arn:aws:iam::123456789012:role/api",
    "arn:aws:iam::123456789012:role/api",
]
OPERATOR = "arn:aws:iam::123456789012:role/operator"


@pytest.fixture(scope="module")
def mod() -> ModuleType:
    spec = importlib.util.spec_from_file_location("role_mapping_handler", HANDLER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeDomain:
    def __init__(self, status: int = 200) -> None:
        self.calls: list[tuple[str, str, dict[str, Any] | None]] = []
        self.status = status

    def __call__(self, method: str, url: str, body: dict[str, Any] | None) -> tuple[int, str]:
        self.calls.append((method, url, body))
        return self.status, '{"status":"OK"}'


def event(kind: str) -> dict[str, Any]:
    """What CloudFormation sends: the properties exactly as the stack builds them."""
    return {
        "RequestType": kind,
        "ResourceProperties": {
            "Endpoint": ENDPOINT,
            "Roles": [
                domain_role_property("memstack_app", "runtime", ROLES),
                domain_role_property("memstack_maintenance", "maintenance", [OPERATOR]),
            ],
        },
    }


def test_create_defines_each_role_with_the_adapters_permissions_then_maps_it(mod: ModuleType) -> None:
    domain = FakeDomain()
    physical = mod.handle(event("Create"), domain)
    assert physical.endswith("#memstack_app,memstack_maintenance")
    (m1, url1, app), (m2, url2, mapping), (_, url3, maintenance), (_, _, operators) = domain.calls
    assert app is not None and mapping is not None and maintenance is not None and operators is not None
    assert (m1, url1) == ("PUT", f"{ENDPOINT}/_plugins/_security/api/roles/memstack_app")
    # The role the security plugin gets is the one derived from the store's calls, nothing wider.
    assert app == domain_role("runtime", "memstack-*")
    assert "indices:admin/index_template/put" in app["cluster_permissions"]  # the store's first call
    assert "indices_all" not in app["index_permissions"][0]["allowed_actions"]
    assert (m2, url2) == ("PUT", f"{ENDPOINT}/_plugins/_security/api/rolesmapping/memstack_app")
    assert mapping["backend_roles"] == sorted(set(ROLES))
    assert url3.endswith("/roles/memstack_maintenance")
    assert "indices:data/write/reindex" in maintenance["cluster_permissions"]
    assert "indices:data/write/reindex" not in app["cluster_permissions"]
    assert operators["backend_roles"] == [OPERATOR]


def test_a_refusal_fails_the_deployment(mod: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="403"):
        mod.handle(event("Update"), FakeDomain(status=403))


def test_delete_removes_mappings_and_roles_and_tolerates_missing(mod: ModuleType) -> None:
    domain = FakeDomain(status=404)
    mod.handle(event("Delete"), domain)
    assert [(m, u.rsplit("/api/", 1)[1]) for m, u, _ in domain.calls] == [
        ("DELETE", "rolesmapping/memstack_app"),
        ("DELETE", "roles/memstack_app"),
        ("DELETE", "rolesmapping/memstack_maintenance"),
        ("DELETE", "roles/memstack_maintenance"),
    ]
