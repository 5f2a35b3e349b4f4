"""Every route through the resolver, as API Gateway calls it (REST proxy events)."""

from __future__ import annotations

import json

from tests.api.conftest import Api, add_body, rest_event


def _add(api: Api, user: str = "alice", *contents: str, **extra: object) -> list[str]:
    status, body = api("POST", "/v1/memories", body=add_body(user, *contents, infer=False, **extra))
    assert status == 202, body
    return body["accepted"]


def test_add_stores_every_message_before_answering(api: Api) -> None:
    status, body = api(
        "POST",
        "/v1/memories",
        body={
            "user_id": "alice",
            "session_id": "s1",
            "infer": False,
            "metadata": {"channel": "chat"},
            "messages": [
                {
                    "id": "m1",
                    "role": "user",
                    "speaker": "Alice",
                    "content": "My sister Ana lives in Porto.",
                    "timestamp": "2026-05-01T10:00:00",
                },
                {"id": "m2", "role": "assistant", "content": "Nice, Porto is lovely."},
            ],
        },
    )
    assert status == 202
    assert body == {
        "accepted": ["m1", "m2"],
        "stored": ["m1", "m2"],
        "queued": 0,
        "status": "stored",
        "job_ids": [],  # nothing to extract: no job
    }
    status, listed = api("GET", "/v1/memories", query={"user_id": "alice"})
    assert status == 200
    by_source = {m["source_ids"][0]: m for m in listed["memories"]}
    assert set(by_source) == {"m1", "m2"}
    assert by_source["m1"]["speaker"] == "Alice"
    assert by_source["m1"]["session_id"] == "s1"
    assert by_source["m1"]["metadata"]["channel"] == "chat"
    # A naive timestamp is read in the configured timezone (UTC by default).
    assert by_source["m1"]["event_time"].startswith("2026-05-01T10:00:00")
    assert "embedding_full" not in by_source["m1"] and "tenant" not in by_source["m1"]


def test_resending_a_message_id_stores_nothing_twice(api: Api) -> None:
    body = {
        "user_id": "alice",
        "infer": False,
        "messages": [{"id": "m1", "role": "user", "content": "hello there"}],
    }
    assert api("POST", "/v1/memories", body=body)[1]["stored"] == ["m1"]
    status, again = api("POST", "/v1/memories", body=body)
    assert status == 202 and again["accepted"] == ["m1"] and again["stored"] == []
    assert len(api("GET", "/v1/memories", query={"user_id": "alice"})[1]["memories"]) == 1


def test_search_ranks_the_matching_memory_first_and_explains(api: Api) -> None:
    _add(
        api,
        "alice",
        "I adopted a cat named Miso.",
        "My favourite food is ramen.",
        "I work as a nurse in Lisbon.",
    )
    status, body = api(
        "POST",
        "/v1/memories/search",
        body={"user_id": "alice", "query": "what is my cat called", "explain": True},
    )
    assert status == 200
    assert body["results"][0]["content"] == "I adopted a cat named Miso."
    assert body["results"][0]["stages"]  # per-stage scores when explain=true
    assert isinstance(body["degraded"], list)
    # Beside the scores, per search: how likely the store holds evidence at all.
    _, unknown = api(
        "POST", "/v1/memories/search", body={"user_id": "alice", "query": "who won the zanzibar chess open"}
    )
    assert 0 <= unknown["evidence"] < body["evidence"] <= 1
    status, plain = api(
        "POST", "/v1/memories/search", body={"user_id": "alice", "query": "ramen", "top_k": 1}
    )
    assert status == 200 and len(plain["results"]) == 1 and plain["results"][0].get("stages") is None


def test_search_min_score_keeps_results_at_least_that_likely(api: Api) -> None:
    _add(api, "alice", "I adopted a cat named Miso.", "My favourite food is ramen.")
    query = {"user_id": "alice", "query": "adopted a cat named Miso"}
    status, everything = api("POST", "/v1/memories/search", body=query)
    assert status == 200 and len(everything["results"]) == 2
    assert all(0.0 <= r["score"] <= 1.0 for r in everything["results"])
    best = everything["results"][0]["score"]
    status, kept = api("POST", "/v1/memories/search", body={**query, "min_score": best})
    assert status == 200 and [r["content"] for r in kept["results"]] == ["I adopted a cat named Miso."]
    status, error = api("POST", "/v1/memories/search", body={**query, "min_score": 1.5})
    assert status in (400, 422) and "min_score" in str(error)


def test_search_filters_apply(api: Api) -> None:
    _add(api, "alice", "I adopted a cat named Miso.")
    status, body = api(
        "POST",
        "/v1/memories/search",
        body={"user_id": "alice", "query": "cat Miso", "filters": {"tier": "ltm"}},
    )
    assert status == 200 and body["results"] == []  # only STM records exist (no extraction)
    status, body = api(
        "POST",
        "/v1/memories/search",
        body={
            "user_id": "alice",
            "query": "cat Miso",
            "filters": {"tier": "stm", "before": "2000-01-01T00:00:00Z"},
        },
    )
    assert status == 200 and body["results"] == []


def test_list_is_newest_first_and_paginates_with_a_cursor(api: Api) -> None:
    for i in range(5):
        _add(api, "alice", f"note number {i}")
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = {"user_id": "alice", "limit": "2", **({"cursor": cursor} if cursor else {})}
        status, page = api("GET", "/v1/memories", query=query)
        assert status == 200
        seen += [m["content"] for m in page["memories"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert pages == 3
    assert seen == [f"note number {i}" for i in reversed(range(5))]


def test_get_update_history_delete(api: Api) -> None:
    _add(api, "alice", "I live in Lisbon.")
    memory = api("GET", "/v1/memories", query={"user_id": "alice"})[1]["memories"][0]
    status, got = api("GET", f"/v1/memories/{memory['id']}", query={"user_id": "alice"})
    assert status == 200 and got["content"] == "I live in Lisbon."

    status, new = api(
        "PATCH", f"/v1/memories/{memory['id']}", body={"user_id": "alice", "content": "I live in Porto."}
    )
    assert status == 200
    assert new["version"] == 2 and new["replaces_id"] == memory["id"] and new["is_current"]

    status, hist = api("GET", f"/v1/memories/{new['id']}/history", query={"user_id": "alice"})
    assert status == 200
    assert [m["content"] for m in hist["memories"]] == ["I live in Lisbon.", "I live in Porto."]
    assert [m["is_current"] for m in hist["memories"]] == [False, True]

    status, deleted = api("DELETE", f"/v1/memories/{new['id']}", query={"user_id": "alice"})
    assert status == 200 and deleted["deleted"] and deleted["version"] == 3
    assert (
        api("GET", f"/v1/memories/{new['id']}", query={"user_id": "alice"})[0] == 200
    )  # old versions stay readable
    assert api("GET", f"/v1/memories/{deleted['tombstone_id']}", query={"user_id": "alice"})[0] == 404
    found = api("POST", "/v1/memories/search", body={"user_id": "alice", "query": "where do I live"})[1]
    assert found["results"] == []  # deleted memories never appear in search
    assert api("GET", "/v1/memories", query={"user_id": "alice"})[1]["memories"] == []
    # Deleting again: the memory is no longer current.
    assert api("DELETE", f"/v1/memories/{new['id']}", query={"user_id": "alice"})[0] == 404


def test_erase_user_removes_everything_and_reports_counts(api: Api) -> None:
    _add(api, "alice", "one", "two")
    _add(api, "bob", "three")
    status, body = api("DELETE", "/v1/users/alice")
    assert status == 200
    assert body["user_id"] == "alice" and body["erased"]["stm"] == 2 and body["erased"]["memories"] == 2
    assert api("GET", "/v1/memories", query={"user_id": "alice"})[1]["memories"] == []
    assert len(api("GET", "/v1/memories", query={"user_id": "bob"})[1]["memories"]) == 1


def test_consolidation_enqueued_answers_202(api: Api) -> None:
    _add(api, "alice", "I started learning the cello this week.")
    status, body = api("POST", "/v1/consolidations", body={"user_id": "alice"})
    assert status == 202, body
    assert body["user_id"] == "alice" and body["status"] == "queued"
    assert "tenant" not in body


def test_consolidation_sync_reports_what_it_read_and_wrote(api: Api) -> None:
    """Exercises engineer F's ``MemoryService.consolidate`` through the route."""
    _add(api, "alice", "I started learning the cello this week.", "My teacher is called Rui.")
    status, body = api("POST", "/v1/consolidations", body={"user_id": "alice", "sync": True})
    assert status == 200, body
    assert body["user_id"] == "alice"
    for key in ("status", "read", "written", "updated", "unchanged", "marked"):
        assert key in body
    assert body["read"] == 2


def test_health_reports_backends_without_credentials(api: Api) -> None:
    status, body = api("GET", "/v1/health", key=None)
    assert status == 200
    assert body["status"] == "ok"
    assert body["backends"]["store"] == "embedded" and body["backends"]["embedder"] == "hashing"


def test_openapi_document_lists_every_route(api: Api) -> None:
    result = api.app.resolve(rest_event("GET", "/openapi.json", key=None), None)
    doc = json.loads(result["body"])
    ops = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert ops == {
        ("/v1/memories/keys/{key}", "put"),
        ("/v1/memories/keys/{key}", "get"),
        ("/v1/memories/keys/{key}", "delete"),
        ("/v1/memories", "post"),
        ("/v1/memories", "get"),
        ("/v1/memories", "delete"),
        ("/v1/memories/search", "post"),
        ("/v1/memories/{memory_id}", "get"),
        ("/v1/memories/{memory_id}", "patch"),
        ("/v1/memories/{memory_id}", "delete"),
        ("/v1/memories/{memory_id}/history", "get"),
        ("/v1/memories/{memory_id}/sources", "get"),
        ("/v1/memories/{memory_id}/restore", "post"),
        ("/v1/users", "get"),
        ("/v1/users/{user_id}", "delete"),
        ("/v1/users/{user_id}/export", "get"),
        ("/v1/users/{user_id}/import", "post"),
        ("/v1/jobs", "get"),
        ("/v1/jobs/{job_id}", "get"),
        ("/v1/jobs/redrive", "post"),
        ("/v1/consolidations", "post"),
        ("/v1/health", "get"),
        ("/v1/config", "get"),
        ("/v1/config", "put"),
        ("/v1/config", "patch"),
    }
    assert "ErrorResponse" in doc["components"]["schemas"]
    swagger = api.app.resolve(rest_event("GET", "/docs", key=None), None)
    assert swagger["statusCode"] == 200 and "swagger" in swagger["body"].lower()


def test_base64_encoded_bodies_from_api_gateway(api: Api) -> None:
    import base64

    event = rest_event("POST", "/v1/memories", body=None)
    message = {"role": "user", "content": "olá, Miso"}
    raw = json.dumps({"user_id": "alice", "infer": False, "messages": [message]})
    event["body"] = base64.b64encode(raw.encode()).decode()
    event["isBase64Encoded"] = True
    assert api.app.resolve(event, None)["statusCode"] == 202
    assert api("GET", "/v1/memories", query={"user_id": "alice"})[1]["memories"][0]["content"] == "olá, Miso"
    event["body"] = base64.b64encode(b'{"user_id": "\xff"}').decode()
    answer = api.app.resolve(event, None)
    assert answer["statusCode"] == 400 and json.loads(answer["body"])["error"]["code"] == "malformed_json"
