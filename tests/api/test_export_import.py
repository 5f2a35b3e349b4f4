"""``GET /v1/users/{id}/export`` and ``POST /v1/users/{id}/import``: limits, errors, tenancy, streaming.

Behind API Gateway the API Lambda answers at most 6 MB, buffered: each answer is a page
whose body, escaped into the Lambda's JSON answer, stays under MEMSTACK_MAX_EXPORT_PAGE_BYTES.
``memstack serve`` streams a whole export (chunked). An import is checked whole before
anything is written, takes its tenant from the credential, and skips what is there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from memstack.api.app import close_app
from memstack.client import AsyncMemoryClient, MemoryApiError, MemoryClient
from memstack.factory import build_service
from memstack.settings import load_settings

from tests.api.conftest import Api, add_body, build_api, rest_event

HEADER = '{"format": "memstack-export", "version": 1}'


def _add(api: Api, user: str, *texts: str, key: str = "acme-key") -> None:
    headers = {"X-Api-Key": key}
    status, body = api("POST", "/v1/memories", body=add_body(user, *texts, infer=False), headers=headers)
    assert status == 202, body


def _export(api: Api, user: str, key: str = "acme-key", **query: str) -> tuple[int, Any]:
    """(status, the answer's lines as JSON or its error) of one export request."""
    result = api.app.resolve(
        rest_event("GET", f"/v1/users/{user}/export", query=query or None, key=key), None
    )
    body = result["body"]
    if result["statusCode"] != 200:
        return result["statusCode"], json.loads(body)
    assert result["multiValueHeaders"]["Content-Type"] == ["application/x-ndjson"]
    return 200, [json.loads(line) for line in body.splitlines()]


def _import(api: Api, user: str, lines: list[str], key: str = "acme-key") -> tuple[int, Any]:
    return api("POST", f"/v1/users/{user}/import", body="\n".join(lines) + "\n", key=key)


def _every_line(api: Api, user: str, key: str = "acme-key", **query: str) -> list[str]:
    """The user's whole export as one file would hold it (the header once), following the cursor."""
    status, page = _export(api, user, key, **query)
    assert status == 200, page
    header, records = page[0], page[1:]
    while header["next_cursor"]:
        status, page = _export(api, user, key, cursor=header["next_cursor"], **query)
        header, records = page[0], [*records, *page[1:]]
    return [json.dumps({**header, "next_cursor": None}), *map(json.dumps, records)]


# ------------------------------------------------------------------------ the export
def test_an_export_page_fits_the_lambda_answer_however_its_text_escapes(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "d", embedder="hashing", max_export_page_bytes=65_536)
    service = build_service(settings)
    api = build_api(service, settings)
    try:
        # Quotes, backslashes, newlines, tabs and emoji all grow when escaped.
        text = 'she said "hi" \\ then\n\t left 🎉 ' * 200
        for n in range(12):
            _add(api, "ann", f"{n} {text}")
        seen: set[str] = set()
        cursor: str | None = None
        pages = 0
        while True:
            query = {"cursor": cursor} if cursor else None
            result = api.app.resolve(rest_event("GET", "/v1/users/ann/export", query=query), None)
            assert result["statusCode"] == 200
            # The whole Lambda answer as the runtime serialises it: the page plus its envelope.
            assert len(json.dumps(result)) <= 65_536 + 2_048
            lines = result["body"].splitlines()
            seen.update(json.loads(line)["id"] for line in lines[1:])
            pages += 1
            cursor = json.loads(lines[0])["next_cursor"]
            if not cursor:
                break
        assert len(seen) == 12 and pages >= 4
        # One record larger than a page: a clear 413, and how to get it anyway.
        _add(api, "bob", "🎉" * 6_000)
        status, error = _export(api, "bob")
        assert status == 413 and error["error"]["code"] == "payload_too_large"
        assert "more than an export page holds (65536)" in error["error"]["message"]
        assert "memstack export" in error["error"]["message"]
    finally:
        close_app(api.app)
        service.close()


def test_export_refuses_what_it_cannot_answer(api: Api) -> None:
    _add(api, "ann", "I like tea.")
    assert _export(api, "nobody")[0] == 404
    assert _export(api, "ann", limit="0")[0] == 422
    assert _export(api, "ann", limit="1001")[0] == 422
    status, error = _export(api, "ann", colour="red")
    assert status == 422 and error["error"]["details"][0]["field"] == "colour"
    status, error = _export(api, "ann", cursor="forged.cursor")
    assert status == 400 and error["error"]["details"][0]["type"] == "bad_cursor"
    # A list cursor is a position in another listing: not an export's.
    _add(api, "ann", "I like coffee.")
    listed = api("GET", "/v1/memories", query={"user_id": "ann", "limit": "1"})[1]
    assert _export(api, "ann", cursor=listed["next_cursor"])[0] == 400


def test_a_tenant_exports_and_imports_only_its_own_users(api: Api) -> None:
    _add(api, "ann", "My locker code is 4711.")
    acme = _every_line(api, "ann")
    assert "acme" not in acme[0]  # the answer never names the tenant
    assert _export(api, "ann", key="globex-key")[0] == 404
    status, page = _export(api, "ann", limit="1")
    if page[0]["next_cursor"]:
        assert _export(api, "ann", key="globex-key", cursor=page[0]["next_cursor"])[0] == 400
    # A file that names another tenant lands in the caller's own.
    forged = [json.dumps({**json.loads(acme[0]), "tenant": "acme"})]
    forged += [json.dumps({**json.loads(line), "tenant": "acme"}) for line in acme[1:]]
    status, report = _import(api, "ann", forged, key="globex-key")
    assert status == 200 and report["imported"] == len(acme) - 1
    globex = api("GET", "/v1/memories", query={"user_id": "ann"}, key="globex-key")[1]["memories"]
    assert [m["content"] for m in globex] == ["My locker code is 4711."]
    assert {m["id"] for m in globex}.isdisjoint(json.loads(line)["id"] for line in acme[1:])
    assert len(api("GET", "/v1/memories", query={"user_id": "ann"})[1]["memories"]) == 1  # acme untouched


# ------------------------------------------------------------------------ the import
def test_an_import_is_checked_whole_before_anything_is_written(api: Api) -> None:
    _add(api, "ann", "I like tea.", "I walk to work.")
    lines = _every_line(api, "ann")
    record = json.loads(lines[1])

    def with_(**change: Any) -> str:
        return json.dumps({**record, "id": "other", **change})

    for bad, field in [
        (with_(id="no spaces allowed"), "line 3: id"),
        (with_(source_ids=["ok", "../etc"]), "line 3: source_ids[1]"),
        (with_(metadata={"topic": {"nested": 1}}), "line 3: metadata.topic"),
        (with_(metadata={"bad key!": 1}), "line 3: metadata.bad key!"),
        (with_(event_time="1066-10-14T00:00:00Z"), "line 3: event_time"),
        # 1e400 is valid JSON text for a number too large for a float: it reads as infinity.
        (with_(embedding_full=[0.25]).replace("0.25", "1e400"), "line 3: embedding_full"),
    ]:
        status, error = _import(api, "bea", [lines[0], lines[1], bad, lines[2]])
        assert status == 422, (field, error)
        assert error["error"]["code"] == "validation_error"
        assert error["error"]["details"][0]["field"] == field, error
        assert _export(api, "bea")[0] == 404, field  # nothing was written
    for body, says in [
        ([lines[0], '{"id": NaN}'], "line 2 is not JSON: NaN"),
        ([lines[0], "{not json"], "line 2 is not JSON"),
        (['{"id": "x"}'], "not a memstack export"),
        ([], "the export is empty"),
        ([HEADER, json.dumps({"content": "x"})], "line 2 is not a memory record"),
    ]:
        status, error = _import(api, "bea", body)
        assert status == 422 and says in error["error"]["message"], (says, error)
    assert _export(api, "bea")[0] == 404
    status, report = _import(api, "bea", lines)
    assert status == 200 and report == {
        "user_id": "bea",
        "imported": 2,
        "skipped_existing": 0,
        "reembedded": 0,
    }


def test_an_import_body_over_the_limit_is_413(small_api: Api) -> None:
    status, error = small_api("POST", "/v1/users/ann/import", body=HEADER + "\n" + "x" * 3000)
    assert status == 413 and error["error"]["code"] == "payload_too_large"


def test_the_openapi_document_describes_both_routes(api: Api) -> None:
    document = json.loads(api.app.resolve(rest_event("GET", "/openapi.json", key=None), None)["body"])
    export = document["paths"]["/v1/users/{user_id}/export"]["get"]
    assert "application/x-ndjson" in export["responses"]["200"]["content"]
    assert {p["name"] for p in export["parameters"]} == {"user_id", "cursor", "limit", "embeddings"}
    imported = document["paths"]["/v1/users/{user_id}/import"]["post"]
    assert "application/x-ndjson" in imported["requestBody"]["content"]
    answer = imported["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert answer.endswith("/ImportUserResponse")


# ------------------------------------------------------------- memstack serve, both clients
@pytest.fixture
def notes(live_server: str) -> Iterator[str]:
    with MemoryClient(live_server, api_key="acme-key") as client:
        for n in range(30):
            client.add(f"note {n}: a thing worth keeping", user_id="ann", infer=False)
    yield live_server


def test_memstack_serve_streams_a_whole_export_and_pages_when_asked(notes: str) -> None:
    headers = {"Authorization": "Bearer acme-key"}
    with httpx.Client(base_url=notes, headers=headers) as http:
        with http.stream("GET", "/v1/users/ann/export") as whole:
            assert whole.headers.get("transfer-encoding") == "chunked"
            assert "content-length" not in whole.headers
            lines = [line for line in whole.iter_lines() if line]
        assert len(lines) == 31 and json.loads(lines[0])["next_cursor"] is None
        page = http.get("/v1/users/ann/export", params={"limit": 7})
        assert int(page.headers["content-length"]) == len(page.content)
        assert len(page.text.splitlines()) == 8 and json.loads(page.text.splitlines()[0])["next_cursor"]


def test_both_clients_export_and_import(notes: str) -> None:
    with MemoryClient(notes, api_key="acme-key") as client:
        whole = list(client.export_user("ann"))
        paged = list(client.export_user("ann", page_size=4))
        assert whole[0] == paged[0] and sorted(whole[1:]) == sorted(paged[1:]) and len(whole) == 31
        report = client.import_user("bea", paged, request_bytes=8_000)  # the server takes 64 KB bodies
        assert (report.imported, report.skipped_existing) == (30, 0)

    async def run() -> tuple[list[str], Any]:
        async with AsyncMemoryClient(notes, api_key="acme-key") as aclient:
            lines = [line async for line in aclient.export_user("bea", page_size=9)]
            again = await aclient.import_user("bea", lines, request_bytes=8_000)
            return lines, again

    lines, again = asyncio.run(run())
    assert len(lines) == 31 and (again.imported, again.skipped_existing) == (0, 30)
    assert sorted(json.loads(line)["content"] for line in lines[1:]) == sorted(
        json.loads(line)["content"] for line in whole[1:]
    )
    with MemoryClient(notes, api_key="acme-key") as client, pytest.raises(MemoryApiError) as missing:
        list(client.export_user("nobody"))
    assert missing.value.status == 404


def test_a_streamed_export_that_fails_midway_is_cut_off_not_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack.api.wsgi_server import make_server, running_in_thread
    from memstack.service import MemoryService

    settings = load_settings(data_dir=tmp_path / "cut", embedder="hashing", api_keys="k=acme")
    service = build_service(settings)
    server, api = make_server(service, settings, host="127.0.0.1", port=0, threads=2)
    pages = 0
    real = MemoryService.export_page

    def second_page_fails(self: MemoryService, *args: Any, **kwargs: Any) -> Any:
        nonlocal pages
        pages += 1
        if pages == 2:
            raise RuntimeError("the store went away")
        return real(self, *args, **kwargs)

    try:
        with running_in_thread(server) as url, MemoryClient(url, api_key="k") as client:
            for n in range(250):  # more than one page (200 versions)
                client.add(f"note {n}", user_id="ann", infer=False)
            monkeypatch.setattr(MemoryService, "export_page", second_page_fails)
            got: list[str] = []
            with pytest.raises(MemoryApiError) as cut:
                got.extend(client.export_user("ann"))
            assert cut.value.code == "connection_error" and "cut off" in cut.value.message
            assert 1 < len(got) <= 201  # the first page arrived; the end never did
    finally:
        api.close()
        service.close()
