"""The OpenSearch role-mapping custom resource's logic, with the HTTP sender injected."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

HANDLER = Path(__file__).resolve().parents[2] / "stacks" / "handlers" / "opensearch_role_mapping" / "index.py"
ENDPOINT = "https://search-memstack.us-east-1.es.amazonaws.com"
ROLES = [
    "arn:aws:iam::123456789012:role/worker",
    "arn:aws:iam::123456789012:role/api",
    "arn:aws:iam::123456789012:role/api",
]


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
    return {
        "RequestType": kind,
        "ResourceProperties": {"Endpoint": ENDPOINT, "RoleArns": ROLES, "IndexPattern": "memstack-*"},
    }


def test_create_defines_the_app_role_then_maps_the_lambda_roles(mod: ModuleType) -> None:
    domain = FakeDomain()
    physical = mod.handle(event("Create"), domain)
    assert physical.endswith("#memstack_app")
    (m1, url1, role), (m2, url2, mapping) = domain.calls
    assert role is not None and mapping is not None
    assert (m1, url1) == ("PUT", f"{ENDPOINT}/_plugins/_security/api/roles/memstack_app")
    assert role["index_permissions"] == [
        {"index_patterns": ["memstack-*"], "allowed_actions": ["indices_all"]}
    ]
    assert (m2, url2) == ("PUT", f"{ENDPOINT}/_plugins/_security/api/rolesmapping/memstack_app")
    assert mapping["backend_roles"] == sorted(set(ROLES))


def test_a_refusal_fails_the_deployment(mod: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="403"):
        mod.handle(event("Update"), FakeDomain(status=403))


def test_delete_removes_mapping_and_tolerates_missing(mod: ModuleType) -> None:
    domain = FakeDomain(status=404)
    mod.handle(event("Delete"), domain)
    assert [(m, u.rsplit("/api/", 1)[1]) for m, u, _ in domain.calls] == [
        ("DELETE", "rolesmapping/memstack_app"),
        ("DELETE", "roles/memstack_app"),
    ]
