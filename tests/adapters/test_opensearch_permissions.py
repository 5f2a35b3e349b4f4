"""The permissions table is the list of calls the OpenSearch store really makes, on both engines."""

from __future__ import annotations

import ast
from pathlib import Path

from memstack.adapters.opensearch import permissions
from memstack.adapters.opensearch.permissions import CALLS, collection_rules, domain_role

PACKAGE = Path(permissions.__file__).parent


def client_calls() -> set[str]:
    """Every ``self.client.<api>`` / ``self.client.indices.<api>`` the package's code references."""
    found: set[str] = set()
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            chain = [node.attr]
            value = node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            chain.reverse()
            if isinstance(value, ast.Name) and value.id == "self" and chain[0] == "client" and len(chain) > 1:
                api = ".".join(chain[1:])
                if api != "indices":
                    found.add(api)
    return found - {"close"}  # closing the HTTP pool is not a request


def test_every_call_the_store_makes_has_its_permissions_and_none_other_is_granted() -> None:
    assert client_calls() == set(CALLS)


def test_the_first_call_of_every_container_is_a_cluster_permission() -> None:
    """indices:admin/index_template/* is cluster-level: cluster_composite_ops does not hold it."""
    role = domain_role("runtime", "memstack-*")
    assert "indices:admin/index_template/put" in role["cluster_permissions"]
    assert "cluster_composite_ops" not in role["cluster_permissions"]


def test_maintenance_calls_are_not_granted_to_the_functions() -> None:
    runtime = domain_role("runtime", "memstack-*")
    maintenance = domain_role("maintenance", "memstack-*")
    assert "indices:data/write/reindex" not in runtime["cluster_permissions"]
    assert set(runtime["cluster_permissions"]) < set(maintenance["cluster_permissions"])
    [runtime_index] = runtime["index_permissions"]  # type: ignore[misc]
    assert "indices:admin/delete" not in runtime_index["allowed_actions"]


def test_serverless_rules_come_from_the_same_table() -> None:
    [index_rule] = collection_rules("runtime", "memstack-medium")
    assert index_rule["Resource"] == ["index/memstack-medium/*"]
    # HEAD <index> first (DescribeIndex), then create or add new fields (UpdateIndex), bulk, search.
    assert index_rule["Permission"] == [
        "aoss:CreateIndex",
        "aoss:DescribeIndex",
        "aoss:ReadDocument",
        "aoss:UpdateIndex",
        "aoss:WriteDocument",
    ]
