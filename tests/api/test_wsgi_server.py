"""The real local server (waitress on a free loopback port) with the Python client and with plain HTTP."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from memstack.client import MemoryApiError, MemoryClient


def test_client_round_trip(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        assert client.health().status == "ok"
        added = client.add(
            [
                {"id": "m1", "role": "user", "content": "I adopted a greyhound called Pixel."},
                {"id": "m2", "role": "user", "content": "I am learning Portuguese."},
            ],
            user_id="alice",
            infer=False,
            session_id="s1",
            idempotency_key="first",
        )
        assert added.accepted == ["m1", "m2"] and added.status == "stored"
        assert client.add("My dentist is Dr. Costa.", user_id="alice", infer=False).status == "stored"

        hits = client.search("what is my dog called", user_id="alice", top_k=2, explain=True)
        assert hits.results[0].content == "I adopted a greyhound called Pixel."
        assert hits.results[0].stages

        page = client.list(user_id="alice", limit=2)
        assert len(page.memories) == 2 and page.next_cursor
        assert len(list(client.iter_memories(user_id="alice", page_size=2))) == 3

        target = next(
            m
            for m in page.memories + client.list(user_id="alice", cursor=page.next_cursor).memories
            if "Portuguese" in m.content
        )
        assert client.get(target.id, user_id="alice").content == "I am learning Portuguese."
        new = client.update(target.id, "I speak Portuguese fluently.", user_id="alice")
        assert new.version == 2 and new.replaces_id == target.id
        assert [m.version for m in client.history(new.id, user_id="alice")] == [1, 2]
        deleted = client.delete(new.id, user_id="alice")
        assert deleted.deleted and deleted.version == 3

        report = client.consolidate("alice")
        assert report.status == "queued" and report.user_id == "alice"
        erased = client.erase_user("alice")
        assert erased.erased["stm"] == 3
        assert client.list(user_id="alice").memories == []


def test_client_errors_carry_the_code(live_server: str) -> None:
    client = MemoryClient(live_server, api_key="acme-key")
    with pytest.raises(MemoryApiError) as not_found:
        client.get("nope", user_id="alice")
    assert not_found.value.status == 404 and not_found.value.code == "not_found"
    assert not_found.value.request_id
    with pytest.raises(MemoryApiError) as invalid:
        client.search("", user_id="alice")
    assert invalid.value.code == "validation_error" and invalid.value.details[0]["field"] == "query"
    with pytest.raises(MemoryApiError) as unauthorized:
        MemoryClient(live_server, api_key="stolen").list(user_id="alice")
    assert unauthorized.value.status == 401 and unauthorized.value.code == "unauthorized"
    with pytest.raises(MemoryApiError) as down:
        MemoryClient("http://127.0.0.1:9", api_key="acme-key", timeout=2).health()
    assert down.value.code == "connection_error"


def test_plain_http(live_server: str) -> None:
    headers = {"Authorization": "Bearer acme-key", "Content-Type": "application/json"}
    r = requests.post(
        f"{live_server}/v1/memories",
        headers=headers,
        timeout=10,
        data=json.dumps(
            {"user_id": "bob", "infer": False, "messages": [{"role": "user", "content": "I like jazz."}]}
        ),
    )
    assert r.status_code == 202 and r.headers["Content-Type"] == "application/json"
    assert r.headers["X-Request-Id"]
    r = requests.get(
        f"{live_server}/v1/memories", params={"user_id": "bob"}, headers={"X-Api-Key": "acme-key"}, timeout=10
    )
    assert r.status_code == 200 and r.json()["memories"][0]["content"] == "I like jazz."
    r = requests.post(f"{live_server}/v1/memories", headers=headers, data=b"{broken", timeout=10)
    assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json"
    r = requests.post(
        f"{live_server}/v1/memories", headers=headers, data=b'{"user_id": "\xff\xfe"}', timeout=10
    )
    assert r.status_code == 400 and r.json()["error"]["code"] == "malformed_json"
    r = requests.post(f"{live_server}/v1/memories", headers=headers, data=b"x" * (64 * 1024 + 1), timeout=10)
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
    r = requests.get(f"{live_server}/nowhere", headers=headers, timeout=10)
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_docs_and_openapi(live_server: str) -> None:
    docs = requests.get(f"{live_server}/docs", timeout=10)
    assert docs.status_code == 200 and docs.headers["Content-Type"].startswith("text/html")
    assert "SwaggerUIBundle" in docs.text
    doc = requests.get(f"{live_server}/openapi.json", timeout=10).json()
    assert doc["openapi"].startswith("3.") and "/v1/memories/search" in doc["paths"]


def test_concurrent_requests_of_two_tenants_stay_isolated(live_server: str) -> None:
    """Many threads at once: each answer must be for its own tenant (the resolver keeps per-thread state)."""
    acme, globex = (
        MemoryClient(live_server, api_key="acme-key"),
        MemoryClient(live_server, api_key="globex-key"),
    )
    acme.add("acme's secret is the blue door.", user_id="alice", infer=False)
    globex.add("globex's secret is the red window.", user_id="alice", infer=False)
    errors: list[str] = []
    lock = threading.Lock()

    def probe(i: int) -> None:
        client, own, other = (
            (acme, "blue door", "red window") if i % 2 else (globex, "red window", "blue door")
        )
        found = client.search("what is the secret", user_id="alice").results
        listed = client.list(user_id="alice").memories
        texts = " ".join(m.content for m in [*found, *listed])
        if own not in texts or other in texts:
            with lock:
                errors.append(texts)

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(probe, range(64)))
    assert errors == []


def test_async_client_round_trip(live_server: str) -> None:
    import anyio
    from memstack.client import AsyncMemoryClient

    async def scenario() -> None:
        async with AsyncMemoryClient(live_server, api_key="acme-key") as client:
            added = await client.add("I keep bees on my roof.", user_id="alice", infer=False)
            assert added.status == "stored"
            hits = await client.search("bees", user_id="alice", top_k=3)
            assert hits.results[0].content == "I keep bees on my roof."
            memories = [m async for m in client.iter_memories(user_id="alice", page_size=1)]
            assert [m.content for m in memories] == ["I keep bees on my roof."]
            with pytest.raises(MemoryApiError) as err:
                await client.get("nope", user_id="alice")
            assert err.value.code == "not_found"

    anyio.run(scenario)


def test_clients_filter_on_agent_and_metadata(live_server: str) -> None:
    import anyio
    from memstack.client import AsyncMemoryClient

    with MemoryClient(live_server, api_key="acme-key") as client:
        client.add(
            "I fly to Osaka in May.", user_id="bo", agent_id="travel", metadata={"trip": "osaka"}, infer=False
        )
        client.add(
            "I fly to Porto in June.",
            user_id="bo",
            agent_id="travel",
            metadata={"trip": "porto"},
            infer=False,
        )
        client.add("I fly kites on Sundays.", user_id="bo", agent_id="hobby", infer=False)
        hits = client.search("fly", user_id="bo", agent_id="travel", metadata={"trip": {"in": ["porto"]}})
        assert [h.content for h in hits.results] == ["I fly to Porto in June."]
        assert hits.results[0].agent_id == "travel"
        hits = client.search("fly", user_id="bo", filters={"tier": "stm", "metadata": {"trip": "osaka"}})
        assert [h.content for h in hits.results] == ["I fly to Osaka in May."]
        page = client.list(user_id="bo", agent_id="hobby")
        assert [m.content for m in page.memories] == ["I fly kites on Sundays."]
        every = list(
            client.iter_memories(user_id="bo", page_size=1, agent_id="travel", metadata={"trip": "porto"})
        )
        assert [m.content for m in every] == ["I fly to Porto in June."]
        with pytest.raises(MemoryApiError) as bad:
            client.search("fly", user_id="bo", metadata={"trip": ["osaka", "porto"]})
        assert bad.value.status == 422 and 'written {"in": [values]}' in bad.value.message
        with pytest.raises(ValueError, match="null matches nothing"):  # JSON would drop it unseen
            client.list(user_id="bo", metadata={"trip": None})

        # min_score (issue 17's calibrated score) passes through: each result scores at least that.
        best = client.search("kites", user_id="bo").results[0].score
        kept = client.search("kites", user_id="bo", min_score=best).results
        assert kept and all(h.score >= best for h in kept)

    async def scenario() -> None:
        async with AsyncMemoryClient(live_server, api_key="acme-key") as client:
            hits = await client.search("fly", user_id="bo", agent_id="hobby")
            assert [h.content for h in hits.results] == ["I fly kites on Sundays."]
            assert all(
                h.score >= 0.5 for h in (await client.search("fly", user_id="bo", min_score=0.5)).results
            )
            page = await client.list(user_id="bo", metadata={"trip": {"in": ["osaka", "porto"]}})
            assert {m.content for m in page.memories} == {"I fly to Osaka in May.", "I fly to Porto in June."}

    anyio.run(scenario)
