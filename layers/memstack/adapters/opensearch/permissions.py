"""Every OpenSearch API call the store makes, and the permission each one needs on each engine.

One table, two readers: the stack derives the fine-grained access control
role of a managed domain (stacks/handlers/opensearch_role_mapping) and the
data access policy of a serverless collection from it, and
tests/adapters/test_opensearch_permissions.py checks it against the calls
the adapter's code actually makes (``client.<api>`` in this package), so a
new call without its permission fails a test instead of answering 403 in
production.

A managed domain's security plugin splits a request into a cluster action
and index actions (evaluated against the memstack index pattern);
``indices:admin/index_template/*`` is a cluster permission, which is why the
store's first call in every container needs more than
``cluster_composite_ops``. Serverless collections have their own, coarser
permission names (``aoss:*``), on the collection or on its indexes.

``runtime`` calls are what the Lambda functions make; ``maintenance`` calls
(reindexing into a new index version, dropping the index) are made by an
operator, so only the maintenance role gets them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Use = Literal["runtime", "maintenance"]


@dataclass(frozen=True)
class Permission:
    use: Use
    cluster: tuple[str, ...] = ()  # security plugin cluster actions (managed domain)
    index: tuple[str, ...] = ()  # security plugin index actions on the memstack index pattern
    collection: tuple[str, ...] = ()  # serverless: data access permissions on the collection
    aoss_index: tuple[str, ...] = ()  # serverless: data access permissions on its indexes


#: client method (as called on the opensearch-py client) -> what it needs
CALLS: dict[str, Permission] = {
    "indices.put_index_template": Permission(
        "runtime",
        cluster=("indices:admin/index_template/put",),
        collection=("aoss:CreateCollectionItems", "aoss:UpdateCollectionItems"),
    ),
    "indices.exists_alias": Permission(
        "runtime", index=("indices:admin/aliases/get",), collection=("aoss:DescribeCollectionItems",)
    ),
    "indices.create": Permission(
        "runtime",
        index=("indices:admin/create", "indices:admin/mapping/put", "indices:admin/aliases"),
        aoss_index=("aoss:CreateIndex",),
        collection=("aoss:CreateCollectionItems",),  # the alias created with the index
    ),
    "bulk": Permission(
        "runtime",
        cluster=("indices:data/write/bulk",),
        index=(
            "indices:data/write/bulk*",
            "indices:data/write/index",
            "indices:data/write/delete",
            "indices:data/write/update",
        ),
        aoss_index=("aoss:WriteDocument",),
    ),
    "get": Permission("runtime", index=("indices:data/read/get",), aoss_index=("aoss:ReadDocument",)),
    "mget": Permission(
        "runtime",
        cluster=("indices:data/read/mget",),
        index=("indices:data/read/mget*",),
        aoss_index=("aoss:ReadDocument",),
    ),
    "search": Permission("runtime", index=("indices:data/read/search",), aoss_index=("aoss:ReadDocument",)),
    "msearch": Permission(
        "runtime",
        cluster=("indices:data/read/msearch",),
        index=("indices:data/read/search",),
        aoss_index=("aoss:ReadDocument",),
    ),
    # A managed domain's erase; serverless collections have no delete-by-query (search + bulk delete).
    "delete_by_query": Permission(
        "runtime",
        cluster=("indices:data/read/scroll", "indices:data/read/scroll/clear"),
        index=("indices:data/write/delete/byquery", "indices:data/read/search"),
    ),
    "indices.get_alias": Permission(
        "maintenance", index=("indices:admin/aliases/get",), collection=("aoss:DescribeCollectionItems",)
    ),
    "reindex": Permission(
        "maintenance",
        cluster=("indices:data/write/reindex",),
        index=("indices:data/read/search", "indices:data/write/index", "indices:data/write/bulk*"),
    ),
    "indices.update_aliases": Permission(
        "maintenance", index=("indices:admin/aliases",), collection=("aoss:UpdateCollectionItems",)
    ),
    "indices.delete": Permission(
        "maintenance", index=("indices:admin/delete",), aoss_index=("aoss:DeleteIndex",)
    ),
    "indices.delete_index_template": Permission(
        "maintenance",
        cluster=("indices:admin/index_template/delete",),
        collection=("aoss:DeleteCollectionItems",),
    ),
}


def _union(uses: tuple[Use, ...], attr: str) -> list[str]:
    return sorted({a for p in CALLS.values() if p.use in uses for a in getattr(p, attr)})


def uses_for(role: Use) -> tuple[Use, ...]:
    """The maintenance role may do everything the functions do, and more."""
    return ("runtime",) if role == "runtime" else ("runtime", "maintenance")


def domain_role(role: Use, index_pattern: str) -> dict[str, object]:
    """The security plugin role body (``PUT _plugins/_security/api/roles/<name>``) for a managed domain."""
    uses = uses_for(role)
    return {
        "cluster_permissions": _union(uses, "cluster"),
        "index_permissions": [{"index_patterns": [index_pattern], "allowed_actions": _union(uses, "index")}],
    }


def collection_rules(role: Use, collection: str) -> list[dict[str, object]]:
    """The rules of a serverless data access policy for one collection."""
    uses = uses_for(role)
    return [
        {
            "ResourceType": "index",
            "Resource": [f"index/{collection}/*"],
            "Permission": _union(uses, "aoss_index"),
        },
        {
            "ResourceType": "collection",
            "Resource": [f"collection/{collection}"],
            "Permission": _union(uses, "collection"),
        },
    ]
