"""OpenSearch's HTTP calls, recorded at the connection, as the authorisations AWS checks for each.

A SigV4-signed request to a managed domain is authorised by IAM as
``es:ESHttp<Method>`` on ``arn:aws:es:<region>:<account>:domain/<name>/<path>``
(the identity policy of the caller's role, and the domain's access policy
if it has one). A request to a serverless collection needs
``aoss:APIAccessAll`` on the collection's ARN in the role's policy, and then
the collection's data access policy must grant the caller the operation's
own permission on the index (or collection) it touches, as AWS's "Supported
operations and plugins in Amazon OpenSearch Serverless" lists them.

``Wire`` answers the recording connection of tests/adapters/opensearch_fake:
the real opensearch-py client builds every request (URL, parameters, NDJSON
bodies), the connection records it, and ``Wire`` answers in the shapes
OpenSearch returns, keeping what was written, so the real store runs any
operation end to end. A request the mapping below does not know raises, so a new call
cannot slip past the check unevaluated.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch

from tests.adapters.opensearch_fake import Recorder, recording_client
from tests.adapters.opensearch_fake import Request as OpenSearchRequest
from tests.infra.iam import Request


@dataclass(frozen=True)
class HttpCall:
    method: str
    path: str  # unquoted, without the query string
    indexes: tuple[str, ...] = ()  # the indexes a bulk or msearch body names (its path may name none)


#: (method, path pattern) -> the serverless data access permission; group "index" is the index name
AOSS_PERMISSIONS: tuple[tuple[str, str, str], ...] = (
    ("HEAD", r"/(?P<index>[^/_][^/]*)", "aoss:DescribeIndex"),
    ("GET", r"/(?P<index>[^/_][^/]*)(/_mapping)?", "aoss:DescribeIndex"),
    ("PUT", r"/(?P<index>[^/_][^/]*)", "aoss:CreateIndex"),
    ("PUT", r"/(?P<index>[^/_][^/]*)/_mapping", "aoss:UpdateIndex"),
    ("DELETE", r"/(?P<index>[^/_][^/]*)", "aoss:DeleteIndex"),
    ("GET", r"/(?P<index>[^/_][^/]*)/_doc/[^/]+", "aoss:ReadDocument"),
    ("PUT", r"/(?P<index>[^/_][^/]*)/_doc/[^/]+", "aoss:WriteDocument"),
    ("POST", r"/(?P<index>[^/_][^/]*)/_doc(/[^/]+)?", "aoss:WriteDocument"),
    ("DELETE", r"/(?P<index>[^/_][^/]*)/_doc/[^/]+", "aoss:WriteDocument"),
    ("POST", r"/(?P<index>[^/_][^/]*)/_(search|msearch|mget|count)", "aoss:ReadDocument"),
    ("GET", r"/(?P<index>[^/_][^/]*)/_(search|msearch|mget|count)", "aoss:ReadDocument"),
    ("POST", r"(/(?P<index>[^/_][^/]*))?/_bulk", "aoss:WriteDocument"),
    ("POST", r"(/(?P<index>[^/_][^/]*))?/_msearch", "aoss:ReadDocument"),
    ("POST", r"/(?P<index>[^/_][^/]*)/_delete_by_query", "aoss:WriteDocument"),
)


def aoss_permission(call: HttpCall) -> list[tuple[str, str]]:
    """(permission, index) pairs the data access policy must grant for one call: on the index in
    its path, or on each index its bulk or msearch body names."""
    for method, pattern, permission in AOSS_PERMISSIONS:
        match = re.fullmatch(pattern, call.path)
        if method == call.method and match:
            index = match.groupdict().get("index")
            return [(permission, i) for i in ([index] if index else call.indexes)]
    raise NotImplementedError(f"no serverless permission known for {call.method} {call.path}")


def domain_request(call: HttpCall, domain_arn: str) -> Request:
    """The IAM request a signed call to a managed domain is: ``es:ESHttp<Method>`` on its path."""
    action = "es:ESHttp" + call.method.capitalize()
    return Request(action, f"{domain_arn}{call.path}" if call.path != "/" else f"{domain_arn}/")


def collection_request(collection_arn: str) -> Request:
    return Request("aoss:APIAccessAll", collection_arn)


def data_access_allows(policy: list[dict[str, Any]], principal: str, permission: str, resource: str) -> bool:
    """Whether a serverless data access policy grants ``principal`` ``permission`` on ``resource``
    (``index/<collection>/<index>`` or ``collection/<collection>``); ``*`` in a rule is a wildcard."""
    from tests.infra.iam import matches

    kind = resource.split("/", 1)[0]
    for rule_set in policy:
        if principal not in rule_set.get("Principal", []):
            continue
        for rule in rule_set["Rules"]:
            if rule["ResourceType"] != kind:
                continue
            granted = any(matches(p, permission) for p in rule["Permission"])
            if granted and any(matches(r, resource) for r in rule["Resource"]):
                return True
    return False


# ----------------------------------------------------------------- the wire
def _bulk(docs: dict[str, dict[str, Any]], lines: list[dict[str, Any]], assign: Any) -> dict[str, Any]:
    items = []
    while lines:
        ((action, meta),) = lines.pop(0).items()
        source = lines.pop(0) if action != "delete" else {}
        doc_id = str(meta.get("_id") or next(assign))  # a collection assigns ids
        if action == "create" and doc_id in docs:  # create never overwrites
            items.append({action: {"_id": doc_id, "status": 409, "error": {"reason": "version conflict"}}})
            continue
        if action == "delete":
            docs.pop(doc_id, None)
        elif action == "update":
            docs[doc_id] = {**docs.get(doc_id, {}), **source.get("doc", {})}
        else:
            docs[doc_id] = source
        status = {"create": 201, "index": 201, "update": 200, "delete": 200}[action]
        result = {"create": "created", "index": "created", "update": "updated", "delete": "deleted"}[action]
        items.append({action: {"_id": doc_id, "status": status, "result": result, "_seq_no": 1}})
    return {"took": 1, "errors": False, "items": items}


def _matches(query: dict[str, Any], source: dict[str, Any]) -> bool:
    """Only ``term``/``terms`` filters (under ``bool`` filter/must) are evaluated; the rest match."""
    ((kind, arg),) = query.items() if len(query) == 1 else (("", None),)
    if kind == "bool":
        return all(_matches(q, source) for part in ("filter", "must") for q in _as_list(arg.get(part, [])))
    if kind == "term":
        ((name, value),) = arg.items()
        return bool(source.get(name) == (value.get("value") if isinstance(value, dict) else value))
    if kind == "terms":
        ((name, values),) = arg.items()
        return source.get(name) in values
    return True


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass
class Wire:
    """Answers as OpenSearch would: writes kept by id (a ``create`` of a taken id is a 409), reads by
    id from those, searches (alone or in an msearch) and delete-by-query by their term filters only,
    a k-NN search finding nothing: which requests the store makes, and what it wrote and erased, is
    what matters here (the IAM check, the erase cases), not what a query would rank."""

    recorder: Recorder = field(default_factory=Recorder)
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)  # _id -> _source
    #: the ids a collection assigns (never one given before, as a real one)
    assigned: Any = field(default_factory=lambda: (f"assigned-{n}" for n in itertools.count()))

    def __post_init__(self) -> None:
        self.recorder.respond = self.answer

    @property
    def calls(self) -> list[HttpCall]:
        return [HttpCall(r.method, r.path, _body_indexes(r)) for r in self.recorder.requests]

    def client(self) -> OpenSearch:
        """The real opensearch-py client, its requests answered here."""
        return recording_client(self.recorder)

    def _hits(self, body: dict[str, Any]) -> dict[str, Any]:
        found = [
            {"_id": i, "_source": s, "_seq_no": 1, "_primary_term": 1, "_score": 1.0, "sort": [i]}
            for i, s in self.docs.items()
            if "knn" not in json.dumps(body.get("query", {})) and _matches(body.get("query", {}), s)
        ]
        return {"total": {"value": len(found), "relation": "eq"}, "max_score": None, "hits": found}

    def _aggregation(self, body: dict[str, Any], agg: dict[str, Any]) -> dict[str, Any]:
        """A ``filter`` aggregation counts the hits its filter matches too; any other is empty."""
        if "filter" not in agg:
            return {"buckets": []}
        query = body.get("query", {})
        return {
            "doc_count": sum(
                1 for s in self.docs.values() if _matches(query, s) and _matches(agg["filter"], s)
            )
        }

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        aggs = body.get("aggs") or body.get("aggregations") or {}
        aggregations = {n: self._aggregation(body, agg) for n, agg in aggs.items()}
        return {"took": 1, "hits": self._hits(body), "aggregations": aggregations}

    def _doc(self, doc_id: str) -> dict[str, Any]:
        if doc_id not in self.docs:
            return {"found": False, "_id": doc_id}
        return {"found": True, "_id": doc_id, "_source": self.docs[doc_id], "_seq_no": 1, "_primary_term": 1}

    def answer(self, request: OpenSearchRequest) -> tuple[int, Any]:
        method, path, body = request.method, request.path, request.body
        if path.endswith("/_bulk"):
            return 200, _bulk(self.docs, request.lines, self.assigned)
        if path.endswith("/_msearch"):  # header and body lines: each search answered as alone
            lines = request.lines
            answers = [{**self._search(b), "status": 200} for b in lines[1::2]]
            return 200, {"took": 1, "responses": answers}
        asked = body if isinstance(body, dict) else {}
        if path.endswith(("/_search", "/_count")):
            return 200, {**self._search(asked), "count": 0}
        if path.endswith("/_mget"):
            return 200, {"docs": [self._doc(str(i)) for i in asked.get("ids", [])]}
        if path.endswith("/_delete_by_query"):
            gone = [i for i, s in self.docs.items() if _matches(asked.get("query", {}), s)]
            for doc_id in gone:
                del self.docs[doc_id]
            return 200, {"took": 1, "deleted": len(gone), "failures": [], "version_conflicts": 0}
        if "/_doc/" in path:
            doc_id = path.rsplit("/", 1)[-1]
            if method == "GET":
                doc = self._doc(doc_id)
                return (200 if doc["found"] else 404), doc
            if method == "DELETE":
                self.docs.pop(doc_id, None)
                return 200, {"result": "deleted", "_id": doc_id}
            self.docs[doc_id] = asked
            return 201, {"result": "created", "_id": doc_id, "_seq_no": 1, "_primary_term": 1}
        if method == "HEAD":
            return 404, {}  # nothing exists yet: the store creates what it needs
        return 200, {"acknowledged": True, "_shards": {"total": 1, "successful": 1, "failed": 0}}


def _body_indexes(request: OpenSearchRequest) -> tuple[str, ...]:
    if not request.path.endswith(("/_bulk", "/_msearch")):
        return ()
    named = set()
    for line in request.lines:
        meta = next(iter(line.values())) if request.path.endswith("/_bulk") and len(line) == 1 else line
        if isinstance(meta, dict):
            named.add(meta.get("_index") or meta.get("index"))
    return tuple(sorted(i for i in named if isinstance(i, str)))
