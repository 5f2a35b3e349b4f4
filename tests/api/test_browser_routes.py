"""The routes the memory browser needs besides users: sources, restore, jobs, explain, and /ui itself."""

from __future__ import annotations

import json
from typing import Any

from memstack.api.app import close_app
from memstack.ports.queue import Job
from memstack.service import MemoryService
from memstack.settings import Settings

from tests.api.conftest import Api, add_body, build_api, rest_event


def _memory(api: Api, user: str = "alice") -> dict:
    status, body = api(
        "POST",
        "/v1/memories",
        body={
            "user_id": user,
            "sync": True,
            "messages": [{"id": "m1", "role": "user", "content": "I moved to Lisbon last spring."}],
        },
    )
    assert status == 200, body
    listed = api("GET", "/v1/memories", query={"user_id": user, "tier": "ltm"})[1]["memories"]
    return next(m for m in listed if "Lisbon" in m["content"])


def test_sources_are_the_raw_turns_a_memory_came_from(api: Api) -> None:
    memory = _memory(api)
    status, body = api("GET", f"/v1/memories/{memory['id']}/sources", query={"user_id": "alice"})
    assert status == 200
    assert [s["message_id"] for s in body["sources"]] == memory["source_ids"] == ["m1"]
    turn = body["sources"][0]["turn"]
    assert turn["tier"] == "stm" and turn["content"] == "I moved to Lisbon last spring."
    # Another user (or tenant) reaches nothing.
    assert api("GET", f"/v1/memories/{memory['id']}/sources", query={"user_id": "bob"})[0] == 404
    assert (
        api("GET", f"/v1/memories/{memory['id']}/sources", query={"user_id": "alice"}, key="globex-key")[0]
        == 404
    )


def test_restore_undoes_a_delete_and_an_edit_with_a_new_version(api: Api) -> None:
    memory = _memory(api)
    edited = api(
        "PATCH", f"/v1/memories/{memory['id']}", body={"user_id": "alice", "content": "Alice lives in Porto."}
    )
    tomb = api("DELETE", f"/v1/memories/{edited[1]['id']}", query={"user_id": "alice"})[1]
    status, restored = api("POST", f"/v1/memories/{tomb['tombstone_id']}/restore", body={"user_id": "alice"})
    assert status == 200, restored
    assert restored["content"] == "Alice lives in Porto." and restored["version"] == 4
    assert restored["metadata"]["restored_from"] == edited[1]["id"]
    # An older version made current again: the Lisbon text is back as version 5.
    status, reverted = api("POST", f"/v1/memories/{memory['id']}/restore", body={"user_id": "alice"})
    assert status == 200 and reverted["content"] == memory["content"] and reverted["version"] == 5
    chain = api("GET", f"/v1/memories/{reverted['id']}/history", query={"user_id": "alice"})[1]["memories"]
    assert [(m["version"], m["deleted"], m["is_current"]) for m in chain] == [
        (1, False, False),
        (2, False, False),
        (3, True, False),
        (4, False, False),
        (5, False, True),
    ]
    status, body = api("POST", f"/v1/memories/{reverted['id']}/restore", body={"user_id": "alice"})
    assert status == 409 and body["error"]["code"] == "conflict"


def test_jobs_lists_this_tenants_dead_letters_and_redrives_them(api: Api, service: MemoryService) -> None:
    assert service.queue is not None
    service.queue.set_handler(lambda job: (_ for _ in ()).throw(RuntimeError("model down")))
    service.queue.send([Job(id="j-acme", type="extract", tenant="acme", user_id="alice")])
    service.queue.send([Job(id="j-globex", type="extract", tenant="globex", user_id="dave")])
    status, body = api("GET", "/v1/jobs")
    assert status == 200
    assert [(j["id"], j["status"], j["user_id"]) for j in body["waiting"]] == [("j-acme", "pending", "alice")]
    assert service.queue.drain(timeout=60)
    body = api("GET", "/v1/jobs")[1]
    assert body["waiting"] == []
    [dead] = body["dead_lettered"]
    assert dead["id"] == "j-acme" and dead["status"] == "dead" and "model down" in dead["error"]
    assert api("POST", "/v1/jobs/redrive", body={"job_ids": ["j-globex"]})[1] == {"redriven": 0}
    assert api("POST", "/v1/jobs/redrive", body={})[1] == {"redriven": 1}
    assert [j["id"] for j in api("GET", "/v1/jobs")[1]["waiting"]] == ["j-acme"]
    assert [j["id"] for j in api("GET", "/v1/jobs", key="globex-key")[1]["dead_lettered"]] == ["j-globex"]
    assert api("POST", "/v1/jobs/redrive", body={"job_ids": ["bad id!"]})[0] == 422


def test_explain_reports_the_query_analysis_and_stage_durations(api: Api) -> None:
    _memory(api)
    body = {"user_id": "alice", "query": "where did I move last spring?", "explain": True}
    answer = api("POST", "/v1/memories/search", body=body)[1]
    explain = answer["explain"]
    assert explain["analysis"]["window"] is not None and explain["analysis"]["history_intent"] is False
    assert explain["stage_durations"]["total"] >= explain["stage_durations"]["query_analysis"]
    assert explain["stage_status"]["query_analysis"] == "ok"
    assert any(k.startswith("rank_after_") for k in answer["results"][0]["stages"])
    plain = api("POST", "/v1/memories/search", body={**body, "explain": False})[1]
    assert "explain" not in plain


def test_list_can_include_superseded_versions(api: Api) -> None:
    memory = _memory(api)
    api(
        "PATCH", f"/v1/memories/{memory['id']}", body={"user_id": "alice", "content": "Alice lives in Porto."}
    )
    current = api("GET", "/v1/memories", query={"user_id": "alice", "tier": "ltm"})[1]["memories"]
    everything = api(
        "GET", "/v1/memories", query={"user_id": "alice", "tier": "ltm", "include_superseded": "true"}
    )[1]["memories"]
    assert memory["id"] not in {m["id"] for m in current}
    assert memory["id"] in {m["id"] for m in everything} and len(everything) == len(current) + 1


def _headers(answer: dict[str, Any]) -> dict[str, str]:
    headers = {
        k: v[0] if isinstance(v, list) else v for k, v in (answer.get("multiValueHeaders") or {}).items()
    }
    headers.update(answer.get("headers") or {})
    return headers


def test_the_page_config_names_a_cognito_sign_in_only_when_one_is_configured(
    api: Api, service: MemoryService, settings: Settings
) -> None:
    answer = api.app.resolve(rest_event("GET", "/ui/config.json", key=None), None)
    assert answer["statusCode"] == 200 and json.loads(answer["body"]) == {"cognito": None}
    configured = build_api(
        service, settings.updated(ui_cognito_client_id="abc123", ui_cognito_region="eu-west-1")
    )
    try:
        answer = configured.app.resolve(rest_event("GET", "/ui/config.json", key=None), None)
        endpoint = "https://cognito-idp.eu-west-1.amazonaws.com/"
        assert json.loads(answer["body"]) == {
            "cognito": {"client_id": "abc123", "region": "eu-west-1", "endpoint": endpoint}
        }
        # The page may then connect to that endpoint too, and to nothing else.
        page = configured.app.resolve(rest_event("GET", "/ui", key=None), None)
        policy = _headers(page)["Content-Security-Policy"]
        assert f"connect-src 'self' {endpoint.rstrip('/')};" in policy
    finally:
        close_app(configured.app)


def test_the_browser_is_served_without_credentials_with_a_strict_policy(api: Api) -> None:
    page = api.app.resolve(rest_event("GET", "/ui", key=None), None)
    assert page["statusCode"] == 200
    headers = _headers(page)
    assert headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "connect-src 'self';" in headers["Content-Security-Policy"]  # no sign-in endpoint configured
    # The sample API Gateway event is on stage "prod": the page's own URLs carry it.
    assert 'src="/prod/ui/app.js"' in page["body"] and "{{BASE}}" not in page["body"]
    script = api.app.resolve(rest_event("GET", "/ui/app.js", key=None), None)
    assert script["statusCode"] == 200 and "sessionStorage" in script["body"]
    assert api.app.resolve(rest_event("GET", "/ui/settings.py", key=None), None)["statusCode"] == 404
    # memstack serve: no stage.
    local = rest_event("GET", "/ui", key=None)
    local["requestContext"]["path"] = "/ui"
    assert 'src="/ui/app.js"' in api.app.resolve(local, None)["body"]
    # The data routes still need a credential.
    assert api("GET", "/v1/users", key=None)[0] == 401
    assert api("POST", "/v1/memories", body=add_body("alice"), key=None)[0] == 401
