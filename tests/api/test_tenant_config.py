"""``GET/PUT/PATCH /v1/config``: the tenant's own configuration, through the resolver and both clients."""

from __future__ import annotations

import asyncio

import pytest
from memstack.client import AsyncMemoryClient, MemoryApiError, MemoryClient
from memstack.domain.tenant.config import SECRET_MASK
from memstack.domain.webhooks.signature import new_secret

from tests.api.conftest import Api, rest_event

PETS = {"name": "pets", "description": "the user's pets and their care", "keywords": ["dog", "cat", "vet"]}


def test_get_answers_the_defaults_until_a_write(api: Api) -> None:
    status, body = api("GET", "/v1/config")
    assert status == 200, body
    assert body["version"] == 0 and body["updated_at"] is None
    assert body["config"]["categories"] == {"mode": "extend", "custom": []}
    assert body["config"]["extraction"]["ignore"] == {"categories": [], "keywords": []}


def test_put_replaces_patch_merges_and_etag_guards(api: Api) -> None:
    status, body = api("PUT", "/v1/config", body={"categories": {"custom": [PETS]}})
    assert status == 200 and body["version"] == 1, body
    assert body["config"]["categories"]["custom"] == [PETS]
    status, body = api(
        "PATCH", "/v1/config", body={"extraction": {"instructions": "Never store health data."}}
    )
    assert status == 200 and body["version"] == 2, body
    assert body["config"]["categories"]["custom"] == [PETS]  # merged, not replaced
    # PUT replaces the whole document: what it leaves out goes back to its defaults.
    status, body = api("PUT", "/v1/config", body={"extraction": {"ignore": {"keywords": ["password"]}}})
    assert status == 200 and body["version"] == 3
    assert body["config"]["categories"]["custom"] == [] and body["config"]["extraction"]["instructions"] == ""

    result = api.app.resolve(rest_event("GET", "/v1/config"), None)
    assert result["multiValueHeaders"]["ETag"] == ['"3"']
    # If-Match with the version read: accepted; with an older one: 412, nothing changed.
    status, body = api(
        "PATCH", "/v1/config", body={"extraction": {"instructions": "a"}}, headers={"If-Match": '"3"'}
    )
    assert status == 200 and body["version"] == 4
    status, body = api(
        "PATCH", "/v1/config", body={"extraction": {"instructions": "b"}}, headers={"If-Match": '"3"'}
    )
    assert status == 412 and body["error"]["code"] == "precondition_failed", body
    assert "version 4, not 3" in body["error"]["message"]
    status, body = api("PUT", "/v1/config", body={}, headers={"If-Match": "three"})
    assert status == 422 and body["error"]["details"][0]["field"] == "If-Match"
    assert api("GET", "/v1/config")[1]["config"]["extraction"]["instructions"] == "a"


@pytest.mark.parametrize(
    ("method", "body", "field"),
    [
        ("PUT", {"categories": {"custom": [{**PETS, "name": "Pets"}]}}, "categories.custom[0].name"),
        ("PUT", {"categories": {"mode": "replace"}}, "categories"),
        ("PUT", {"tenant": "globex"}, "tenant"),
        ("PATCH", {"categories": {"custom": [PETS, PETS]}}, "categories"),
        ("PATCH", {"extraction": {"ignore": {"categories": ["pets"]}}}, "extraction"),
        ("PATCH", {"extraction": {"instructions": 7}}, "extraction.instructions"),
        ("PATCH", [1, 2], "body"),
    ],
)
def test_a_bad_configuration_is_a_clear_422_that_changes_nothing(
    api: Api, method: str, body: object, field: str
) -> None:
    api("PUT", "/v1/config", body={"extraction": {"instructions": "keep me"}})
    status, answer = api(method, "/v1/config", body=body)
    assert status == 422, answer
    error = answer["error"]
    assert error["code"] == "validation_error" and error["details"][0]["field"] == field, error
    after = api("GET", "/v1/config")[1]
    assert after["version"] == 1 and after["config"]["extraction"]["instructions"] == "keep me"


def test_malformed_json_unknown_query_and_no_credential(api: Api) -> None:
    status, answer = api("PUT", "/v1/config", body="{not json")
    assert status == 400 and answer["error"]["code"] == "malformed_json"
    status, answer = api("GET", "/v1/config", query={"tenant": "globex"})
    assert status == 422 and "tenant" in answer["error"]["message"]
    status, answer = api("GET", "/v1/config", key=None)
    assert status == 401
    status, answer = api("DELETE", "/v1/config")
    assert status == 405 and answer["error"]["code"] == "method_not_allowed"


def test_a_body_over_the_api_limit_is_413(small_api: Api) -> None:
    status, answer = small_api("PUT", "/v1/config", body={"extraction": {"instructions": "x" * 3000}})
    assert status == 413 and answer["error"]["code"] == "payload_too_large"


def test_a_second_tenant_never_sees_or_changes_the_first_ones(api: Api) -> None:
    api("PUT", "/v1/config", body={"categories": {"custom": [PETS]}})
    status, theirs = api("GET", "/v1/config", key="globex-key")
    assert status == 200 and theirs["version"] == 0 and theirs["config"]["categories"]["custom"] == []
    # globex's writes are its own, versioned from 0; acme's document is untouched.
    status, theirs = api("PATCH", "/v1/config", body={"extraction": {"instructions": "g"}}, key="globex-key")
    assert status == 200 and theirs["version"] == 1
    status, theirs = api("PUT", "/v1/config", body={}, key="globex-key", headers={"If-Match": '"1"'})
    assert status == 200 and theirs["version"] == 2
    mine = api("GET", "/v1/config")[1]
    assert mine["version"] == 1 and mine["config"]["categories"]["custom"] == [PETS]
    assert mine["config"]["extraction"]["instructions"] == ""


def test_both_python_clients(live_server: str) -> None:
    with MemoryClient(live_server, api_key="acme-key") as client:
        assert client.get_config().version == 0
        put = client.put_config({"categories": {"custom": [PETS]}})
        assert put.version == 1 and put.config.categories.custom[0].name == "pets"
        patched = client.patch_config({"extraction": {"ignore": {"categories": ["pets"]}}}, if_version=1)
        assert patched.version == 2
        # None in a merge patch resets that key (it is sent as JSON null, not dropped).
        reset = client.patch_config({"extraction": None, "categories": {"mode": "extend"}})
        assert reset.version == 3 and reset.config.extraction.ignore.categories == []
        with pytest.raises(MemoryApiError) as caught:
            client.put_config({}, if_version=1)
        assert caught.value.status == 412 and caught.value.code == "precondition_failed"
        with pytest.raises(MemoryApiError) as caught:
            client.patch_config({"categories": {"mode": "replace", "custom": []}})
        assert caught.value.status == 422

    async def run() -> None:
        async with AsyncMemoryClient(live_server, api_key="globex-key") as client:
            assert (await client.get_config()).version == 0  # acme's writes are not globex's
            put = await client.put_config({"extraction": {"instructions": "only work topics"}})
            assert put.version == 1
            patched = await client.patch_config({"extraction": {"only": {"categories": ["professional"]}}})
            assert patched.config.extraction.instructions == "only work topics"
            assert (await client.get_config()).config.extraction.only.categories == ["professional"]

    asyncio.run(run())
    with MemoryClient(live_server, api_key="acme-key") as client:
        assert client.get_config().config.extraction.instructions == ""


def test_the_clients_read_back_a_configuration_with_webhooks(live_server: str) -> None:
    secret = new_secret()
    hooks = {"url": "https://hooks.example.com/m", "secret": secret, "events": ["memory.created"]}
    with MemoryClient(live_server, api_key="acme-key") as client:
        put = client.put_config({"webhooks": hooks})
        # The answer's secret is the mask, which the client reads (a caller could not send it).
        assert put.config.webhooks.secret is not None
        assert put.config.webhooks.secret.get_secret_value() == SECRET_MASK
        assert client.get_config().config.webhooks.events == ["memory.created"]
        patched = client.patch_config({"extraction": {"instructions": "work topics only"}})
        assert patched.version == 2 and patched.config.webhooks.url == hooks["url"]
        with pytest.raises(MemoryApiError) as caught:
            client.put_config(client.get_config().config)  # the mask is not a secret
        assert caught.value.status == 422

    async def run() -> None:
        async with AsyncMemoryClient(live_server, api_key="acme-key") as client:
            read = await client.get_config()
            assert read.version == 2 and read.config.webhooks.events == ["memory.created"]

    asyncio.run(run())
