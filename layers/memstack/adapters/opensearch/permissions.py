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
Engine = Literal["es", "aoss"]
BOTH: tuple[Engine, ...] = ("es", "aoss")
DOMAIN: tuple[Engine, ...] = ("es",)
SERVERLESS: tuple[Engine, ...] = ("aoss",)


@dataclass(frozen=True)
class Permission:
    use: Use
    engines: tuple[Engine, ...]  # which store makes the call: managed domain (es), serverless (aoss)
    cluster: tuple[str, ...] = ()  # security plugin cluster actions (managed domain)
    index: tuple[str, ...] = ()  # security plugin index actions on the memstack index pattern
    aoss_index: tuple[str, ...] = ()  # serverless: data access permissions on the collection's indexes


#: client method (as called on the opensearch-py client) -> who calls it and what it needs
CALLS: dict[str, Permission] = {
    # managed domain: an index template + <alias>-v<N> indices behind an alias (store.py, index.py)
    "indices.put_index_template": Permission(
        "runtime", DOMAIN, cluster=("indices:admin/index_template/put",)
    ),
    "indices.exists_alias": Permission("runtime", DOMAIN, index=("indices:admin/aliases/get",)),
    # serverless: one index created with its mappings (serverless.py)
    "indices.exists": Permission("runtime", SERVERLESS, aoss_index=("aoss:DescribeIndex",)),
    "indices.create": Permission(
        "runtime",
        BOTH,
        index=("indices:admin/create", "indices:admin/mapping/put", "indices:admin/aliases"),
        aoss_index=("aoss:CreateIndex",),
    ),
    # An index made by an older memstack gets the fields added since (index.py, serverless.py).
    "indices.put_mapping": Permission(
        "runtime", BOTH, index=("indices:admin/mapping/put",), aoss_index=("aoss:UpdateIndex",)
    ),
    "bulk": Permission(
        "runtime",
        BOTH,
        cluster=("indices:data/write/bulk",),
        index=(
            "indices:data/write/bulk*",
            "indices:data/write/index",
            "indices:data/write/delete",
            "indices:data/write/update",
        ),
        aoss_index=("aoss:WriteDocument",),
    ),
    "get": Permission("runtime", DOMAIN, index=("indices:data/read/get",)),
    "mget": Permission(
        "runtime", DOMAIN, cluster=("indices:data/read/mget",), index=("indices:data/read/mget*",)
    ),
    "search": Permission(
        "runtime", BOTH, index=("indices:data/read/search",), aoss_index=("aoss:ReadDocument",)
    ),
    "msearch": Permission(
        "runtime",
        BOTH,
        cluster=("indices:data/read/msearch",),
        index=("indices:data/read/search",),
        aoss_index=("aoss:ReadDocument",),
    ),
    # A managed domain's erase; serverless collections have no delete-by-query (search + bulk delete).
    "delete_by_query": Permission(
        "runtime",
        DOMAIN,
        cluster=("indices:data/read/scroll", "indices:data/read/scroll/clear"),
        index=("indices:data/write/delete/byquery", "indices:data/read/search"),
    ),
    # Erase on a managed domain: the erasure marker (its index is created on first use), a refresh
    # so delete-by-query finds every write, and a background merge that expunges the deleted docs.
    "index": Permission(
        "runtime",
        DOMAIN,
        index=("indices:data/write/index", "indices:admin/create", "indices:admin/mapping/put"),
    ),
    "indices.refresh": Permission("runtime", DOMAIN, index=("indices:admin/refresh*",)),
    "indices.forcemerge": Permission("runtime", DOMAIN, index=("indices:admin/forcemerge",)),
    "indices.get_alias": Permission("maintenance", DOMAIN, index=("indices:admin/aliases/get",)),
    "reindex": Permission(
        "maintenance",
        DOMAIN,
        cluster=("indices:data/write/reindex",),
        index=("indices:data/read/search", "indices:data/write/index", "indices:data/write/bulk*"),
    ),
    "indices.update_aliases": Permission("maintenance", DOMAIN, index=("indices:admin/aliases",)),
    "indices.delete": Permission(
        "maintenance", BOTH, index=("indices:admin/delete",), aoss_index=("aoss:DeleteIndex",)
    ),
    "indices.delete_index_template": Permission(
        "maintenance", DOMAIN, cluster=("indices:admin/index_template/delete",)
    ),
}


def uses_for(role: Use) -> tuple[Use, ...]:
    """The maintenance role may do everything the functions do, and more."""
    return ("runtime",) if role == "runtime" else ("runtime", "maintenance")


def calls(role: Use, engine: Engine) -> list[str]:
    """The calls a role makes on an engine."""
    return sorted(name for name, p in CALLS.items() if p.use in uses_for(role) and engine in p.engines)


def _union(role: Use, engine: Engine, attr: str) -> list[str]:
    return sorted({a for name in calls(role, engine) for a in getattr(CALLS[name], attr)})


def domain_role(role: Use, index_pattern: str) -> dict[str, object]:
    """The security plugin role body (``PUT _plugins/_security/api/roles/<name>``) for a managed domain."""
    return {
        "cluster_permissions": _union(role, "es", "cluster"),
        "index_permissions": [
            {"index_patterns": [index_pattern], "allowed_actions": _union(role, "es", "index")}
        ],
    }


def collection_rules(role: Use, collection: str) -> list[dict[str, object]]:
    """The rules of a serverless data access policy for one collection (the store needs only index rights)."""
    return [
        {
            "ResourceType": "index",
            "Resource": [f"index/{collection}/*"],
            "Permission": _union(role, "aoss", "aoss_index"),
        }
    ]
