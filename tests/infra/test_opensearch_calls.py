"""Every HTTP call the OpenSearch store makes, as its functions' roles in the template must allow it.

The real store (``OpenSearchMemoryStore.from_settings``) is built from each
data-plane function's environment as the template sets it (endpoint,
engine, index) and run through everything the handlers ask of it: first
use (template or index creation), writes, reads, searches, listings,
supersede, mark, erase, the tenant's configuration. Its requests, recorded at the HTTP connection
(``opensearch_wire``), are evaluated as AWS evaluates SigV4 requests:

- managed domain (medium, large): ``es:ESHttp<Method>`` on
  ``<domain ARN>/<path>``, against the function role's statements;
- serverless collection: ``aoss:APIAccessAll`` on the collection ARN
  against the role's statements, and each call's data access permission
  on ``index/<collection>/<index>`` against the collection's data access
  policy in the template, for that role's ARN.

moto has no OpenSearch data plane and no CloudFormation model of a domain
or collection, so this runs on the synthesised template with the values
CloudFormation would give (``cloudformation._stand_in``) rather than
inside the deployed flow, which covers the tiers without OpenSearch.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from memstack.models import Kind, MemoryFilters, MemoryRecord, Scope, Tier
from memstack.settings import load_settings

from tests.infra.cloudformation import CreatedStack, adapt
from tests.infra.conftest import Synth
from tests.infra.deployed import DeployedStack
from tests.infra.iam import Request, decide, function_role, role_statements
from tests.infra.opensearch_wire import (
    HttpCall,
    Wire,
    aoss_permission,
    collection_request,
    data_access_allows,
    domain_request,
)

pytestmark = pytest.mark.slow

DATA_PLANE = ("api", "extraction_worker", "consolidation_worker")
TRANSPORT = {"aws:SecureTransport": "true"}
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class TemplateOnly(DeployedStack):
    """A synthesised template's references resolved to the values a deploy would give, without one."""

    def __init__(self, synth: Synth, name: str) -> None:
        super().__init__(synth.raw, synth.outdir, session=None, name=name)
        adapted = adapt(synth.raw, name)
        physical = {lid: f"{name}-{lid}-GENERATED" for lid in synth.raw["Resources"]}
        physical.update({lid: s.ref for lid, s in adapted.stand_ins.items()})
        self.created = CreatedStack(name, synth.raw, adapted, physical, "CREATE_COMPLETE")

    def attribute(self, lid: str, attribute: str) -> str:
        try:
            return super().attribute(lid, attribute)
        except (AssertionError, KeyError):  # what only a created resource knows (a stream ARN)
            return f"arn:aws:unresolved:::{lid}.{attribute}"

    def template_environment(self, lid: str) -> dict[str, str]:
        props = self.template["Resources"][lid]["Properties"]
        return {k: str(v) for k, v in self.resolve(props["Environment"]["Variables"]).items()}


def _record(memory_id: str, content: str, dim: int) -> MemoryRecord:
    vector = np.ones(dim, dtype=np.float32) / np.sqrt(dim)
    return MemoryRecord(
        id=memory_id,
        tenant="t1",
        user_id="u1",
        scope=Scope.USER,
        tier=Tier.LTM,
        kind=Kind.FACT,
        content=content,
        created_at=T0,
        source_ids=[f"m-{memory_id}"],
        embedding_full=vector.tolist(),
    )


def _drive(env: dict[str, str], wire: Wire) -> None:
    """Everything the handlers ask of the store, on the store the function's environment builds."""
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore

    flat = {k.removeprefix("MEMSTACK_").lower(): v for k, v in env.items() if k.startswith("MEMSTACK_")}
    settings = load_settings(**flat)
    store = OpenSearchMemoryStore.from_settings(settings, wire.client())
    store.index.sleep = lambda _: None  # waits (serverless visibility, backoff) change no request
    dim = settings.embedding.embedding_dim
    query = np.ones(dim, dtype=np.float32) / np.sqrt(dim)
    store.put([_record("a", "Alex moved to Lisbon", dim)])
    store.get("t1", "u1", "a")
    store.get_many("t1", "u1", ["a", "b"])
    store.embeddings("t1", "u1", ["a"])
    store.list("t1", "u1", MemoryFilters(), 10, None)
    store.users("t1", 10, None)
    store.find_by_source("t1", "u1", "m-a")
    store.successor("t1", "u1", "a")
    coarse = query[: settings.embedding.coarse_dim]
    store.hybrid_candidates("t1", "u1", "where does Alex live", coarse, 20, 20, MemoryFilters())
    # What a search sends: its BM25, k-NN and term-count searches in one _msearch.
    store.hybrid_candidates_with_counts("t1", "u1", "where does Alex live", coarse, 20, 20, MemoryFilters())
    store.mark("t1", "u1", ["a"], is_current=False)
    store.supersede("t1", "u1", "a", _record("b", "Alex moved to Porto", dim))
    # The tenant's configuration (its own index beside the memories): the API writes and reads it,
    # the workers read it to file and screen what they extract and consolidate.
    configs = store.tenant_config_store()
    configs.get("t1")
    configs.put("t1", {"extraction": {"ignore": {"categories": ["health"]}}}, 0, T0)
    configs.put("t1", {}, 1, T0)
    store.erase_user("t1", "u1")
    store.close()


@pytest.mark.parametrize("tier", ["medium", "large", "serverless"])
def test_every_opensearch_call_of_every_data_plane_function_is_allowed(
    tier: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(tier)
    stack = TemplateOnly(synth, f"memstack-{tier}")
    serverless = bool(stack.resources("AWS::OpenSearchServerless::Collection"))
    refused: list[str] = []
    for handler_dir in DATA_PLANE:
        lid = stack.function_id(handler_dir)
        env = stack.template_environment(lid)
        assert env["MEMSTACK_STORE_BACKEND"] == "opensearch"
        wire = Wire()
        _drive(env, wire)
        calls = sorted(set(wire.calls), key=lambda c: (c.path, c.method))
        assert calls, "the store made no request"
        role = function_role(stack.template, lid)
        statements = role_statements(stack.template, role, stack.resolve)
        check = _serverless_refusals if serverless else _domain_refusals
        refused += [f"{handler_dir}: {why}" for why in check(stack, env, role, statements, calls)]
        # Not vacuous: without the role's statements every one of those calls is refused.
        assert len(check(stack, env, role, [], calls)) >= (1 if serverless else len(calls))
    assert not refused, "calls AWS would refuse:\n" + "\n".join(refused)


def _allowed(statements: list[dict[str, Any]], iam_request: Request) -> bool:
    return decide(statements, Request(iam_request.action, iam_request.resource, TRANSPORT)) == "Allow"


def _domain_refusals(
    stack: TemplateOnly, env: dict[str, str], _: str, statements: list[dict[str, Any]], calls: list[HttpCall]
) -> list[str]:
    [domain] = stack.resources("AWS::OpenSearchService::Domain")
    arn = stack.attribute(domain, "Arn")
    # The endpoint the function signs its requests for is the domain the ARN names.
    assert env["MEMSTACK_OPENSEARCH_ENDPOINT"] == "https://" + stack.attribute(domain, "DomainEndpoint")
    wanted = [domain_request(call, arn) for call in calls]
    return [f"{r.action} on {r.resource}" for r in wanted if not _allowed(statements, r)]


def _serverless_refusals(
    stack: TemplateOnly,
    env: dict[str, str],
    role: str,
    statements: list[dict[str, Any]],
    calls: list[HttpCall],
) -> list[str]:
    [(lid, collection)] = stack.resources("AWS::OpenSearchServerless::Collection").items()
    name = collection["Properties"]["Name"]
    arn = stack.attribute(lid, "Arn")
    assert env["MEMSTACK_OPENSEARCH_ENDPOINT"] == stack.attribute(lid, "CollectionEndpoint")
    out = [] if _allowed(statements, collection_request(arn)) else [f"aoss:APIAccessAll on {arn}"]
    [policy] = [
        p["Properties"]["Policy"]
        for p in stack.resources("AWS::OpenSearchServerless::AccessPolicy").values()
        if p["Properties"]["Type"] == "data"
    ]
    document = json.loads(policy if isinstance(policy, str) else stack.resolve(policy))
    principal = stack.attribute(role, "Arn")
    for call in calls:
        assert aoss_permission(call), f"{call.method} {call.path} names no index"
        for permission, index in aoss_permission(call):
            resource = f"index/{name}/{index}"
            if not data_access_allows(document, principal, permission, resource):
                out.append(f"{permission} on {resource} ({call.method} {call.path})")
    return out
