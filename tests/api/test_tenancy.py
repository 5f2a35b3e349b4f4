"""Tenancy: the tenant comes from authentication only; every route is isolated by tenant and user.

Three owners of data: tenant acme / user alice, tenant acme / user bob, and
tenant globex / user alice (the same user_id in another tenant).
"""

from __future__ import annotations

from typing import Any

import pytest
from memstack.api.auth import RequestContextAuthenticator, principal_tenant
from memstack.errors import Unauthorized
from memstack.service import MemoryService
from memstack.settings import Settings

from tests.api.conftest import Api, build_api, rest_event

OWNERS = [("acme-key", "alice"), ("acme-key", "bob"), ("globex-key", "alice")]


def _seed(api: Api) -> dict[tuple[str, str], str]:
    """One memory per owner, each with a distinct secret; returns owner → memory id."""
    ids = {}
    for key, user in OWNERS:
        secret = f"the secret of {key.split('-')[0]} {user} is {len(ids)}-zebra"
        status, _ = api(
            "POST",
            "/v1/memories",
            key=key,
            body={"user_id": user, "infer": False, "messages": [{"role": "user", "content": secret}]},
        )
        assert status == 202
        status, listed = api("GET", "/v1/memories", key=key, query={"user_id": user})
        assert status == 200 and len(listed["memories"]) == 1
        ids[(key, user)] = listed["memories"][0]["id"]
    return ids


def test_search_and_list_see_only_the_callers_tenant_and_user(api: Api) -> None:
    ids = _seed(api)
    for key, user in OWNERS:
        _, found = api(
            "POST", "/v1/memories/search", key=key, body={"user_id": user, "query": "secret zebra"}
        )
        assert [r["id"] for r in found["results"]] == [ids[(key, user)]]
        _, listed = api("GET", "/v1/memories", key=key, query={"user_id": user})
        assert [m["id"] for m in listed["memories"]] == [ids[(key, user)]]


@pytest.mark.parametrize("owner", OWNERS)
def test_every_id_route_answers_404_for_anyone_else(api: Api, owner: tuple[str, str]) -> None:
    ids = _seed(api)
    memory_id = ids[owner]
    for key, user in OWNERS:
        if (key, user) == owner:
            continue
        q = {"user_id": user}
        assert api("GET", f"/v1/memories/{memory_id}", key=key, query=q)[0] == 404
        assert api("GET", f"/v1/memories/{memory_id}/history", key=key, query=q)[0] == 404
        status, body = api(
            "PATCH", f"/v1/memories/{memory_id}", key=key, body={"user_id": user, "content": "mine"}
        )
        assert status == 404 and body["error"]["code"] == "not_found"
        assert api("DELETE", f"/v1/memories/{memory_id}", key=key, query=q)[0] == 404
    # The owner still sees it, untouched.
    key, user = owner
    status, got = api("GET", f"/v1/memories/{memory_id}", key=key, query={"user_id": user})
    assert status == 200 and got["version"] == 1 and got["is_current"]


def test_erasing_a_user_touches_no_other_tenant_or_user(api: Api) -> None:
    ids = _seed(api)
    status, body = api("DELETE", "/v1/users/alice", key="acme-key")
    assert status == 200 and body["erased"]["memories"] == 1 and body["erased"]["stm"] == 1
    assert (
        api("GET", f"/v1/memories/{ids[('acme-key', 'alice')]}", key="acme-key", query={"user_id": "alice"})[
            0
        ]
        == 404
    )
    for key, user in [("acme-key", "bob"), ("globex-key", "alice")]:
        assert api("GET", f"/v1/memories/{ids[(key, user)]}", key=key, query={"user_id": user})[0] == 200


def test_consolidation_is_per_tenant(api: Api) -> None:
    _seed(api)
    status, body = api(
        "POST", "/v1/consolidations", key="globex-key", body={"user_id": "alice", "sync": True}
    )
    assert status == 200 and body["read"] == 1  # only globex/alice's one turn


def test_a_tenant_field_in_the_body_is_rejected_not_used(api: Api) -> None:
    status, body = api(
        "POST",
        "/v1/memories",
        key="acme-key",
        body={"user_id": "alice", "tenant": "globex", "messages": [{"role": "user", "content": "x"}]},
    )
    assert status == 422 and body["error"]["details"][0]["field"] == "tenant"


def _aws_event(method: str, path: str, **identity: Any) -> dict[str, Any]:
    event = rest_event(method, path, key=None, query={"user_id": "alice"} if method == "GET" else None)
    claims = identity.pop("claims", None)
    event["requestContext"]["identity"].update(identity)
    if claims is not None:
        event["requestContext"]["authorizer"] = {"claims": claims}
    return event


def test_request_context_tenants() -> None:
    auth = RequestContextAuthenticator()
    role_session = "arn:aws:sts::123456789012:assumed-role/AgentRole/session-1"
    assert (
        auth.tenant(_aws_event("GET", "/", userArn=role_session))
        == "arn:aws:iam::123456789012:role/AgentRole"
    )
    user = "arn:aws:iam::123456789012:user/agent"
    assert auth.tenant(_aws_event("GET", "/", userArn=user)) == user
    assert auth.tenant(_aws_event("GET", "/", claims={"client_id": "abc123", "sub": "x"})) == "cognito:abc123"
    assert auth.tenant(_aws_event("GET", "/", caller="AROAEXAMPLE:session-9")) == "iam:AROAEXAMPLE"
    with pytest.raises(Unauthorized):
        auth.tenant(_aws_event("GET", "/"))
    # Two sessions of one role are one tenant.
    assert principal_tenant(role_session) == principal_tenant(role_session.replace("session-1", "session-2"))


def test_in_aws_the_tenant_is_the_iam_principal(service: MemoryService, settings: Settings) -> None:
    api = build_api(service, settings, RequestContextAuthenticator())
    role_a = "arn:aws:sts::111111111111:assumed-role/AgentA/s1"
    role_b = "arn:aws:sts::222222222222:assumed-role/AgentB/s1"
    add = _aws_event("POST", "/v1/memories", userArn=role_a)
    add["body"] = (
        '{"user_id": "alice", "infer": false, "messages": [{"role": "user", "content": "A knows this"}]}'
    )
    assert api.app.resolve(add, None)["statusCode"] == 202
    mine = api.app.resolve(_aws_event("GET", "/v1/memories", userArn=role_a.replace("/s1", "/s2")), None)
    theirs = api.app.resolve(_aws_event("GET", "/v1/memories", userArn=role_b), None)
    assert '"A knows this"' in mine["body"]
    assert theirs["statusCode"] == 200 and '"memories": []' in theirs["body"]
    # An API key means nothing in AWS mode; no identity is a 401.
    anonymous = rest_event("GET", "/v1/memories", query={"user_id": "alice"}, key="acme-key")
    assert api.app.resolve(anonymous, None)["statusCode"] == 401
