"""Requests from a hostile client that broke a user or a request (issue 25, items 1, 2, 6, 7, 8 and 9).

Each answered 500 or left half a request stored; each is now a 4xx that
stores nothing (or just works), checked through the API with every table
counted and the file's bytes scanned before and after.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from memstack.domain.cursors import CursorSigner, decode_row_position
from memstack.errors import BadRequest, DependencyFailed
from memstack.factory import build_service
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

from tests.api.conftest import Api, build_api
from tests.api.conftest import live_server as live_server  # pytest fixture
from tests.api.test_errors import assert_error
from tests.reliability.faults import Fail
from tests.reliability.traces import assert_no_trace, table_counts

EXTREME = "9999-12-31T23:59:59-14:00"
HUGE = "9" * 5000
# A word no other request writes: if it is anywhere in the file, the refused request left it there.
MARK = "zyxwvmarker"


@pytest.fixture
def hostile(settings: Settings) -> Iterator[tuple[Api, MemoryService, Settings]]:
    service = build_service(settings)
    api = build_api(service, settings)
    yield api, service, settings
    service.close()


def _raw(api: Api, method: str, path: str, body: str, **kwargs: Any) -> tuple[int, Any]:
    """A request whose body is sent as written (escapes and digits the JSON encoder would not make)."""
    return api(method, path, body=body, **kwargs)


def _usable(api: Api, user: str = "alice") -> None:
    """Every read of the user still answers, and a later message is extracted (not dead-lettered)."""
    assert api("GET", "/v1/memories", query={"user_id": user})[0] == 200
    assert api("POST", "/v1/memories/search", body={"user_id": user, "query": "where do I live"})[0] == 200
    body = {"user_id": user, "sync": True, "messages": [{"role": "user", "content": "I live in Tallinn."}]}
    status, answer = api("POST", "/v1/memories", body=body)
    assert status == 200 and answer["status"] == "processed", answer
    assert api("POST", "/v1/consolidations", body={"user_id": user, "sync": True})[0] == 200


# ------------------------------------------------------------------ item 1: one time bound
@pytest.mark.parametrize("stamp", [EXTREME, "0001-01-01T00:00:00+14:00", "1066-10-14T09:00:00Z"])
def test_a_keyed_event_time_outside_the_range_is_422_and_the_user_stays_usable(hostile, stamp: str) -> None:
    api, service, settings = hostile
    before = table_counts(settings.db_path)
    body = {"user_id": "alice", "content": f"{MARK} moved", "event_time": stamp}
    status, answer = api("PUT", "/v1/memories/keys/home-city", body=body)
    assert_error(status, answer, 422, "validation_error", "event_time")
    assert_no_trace(settings.db_path, before, MARK)
    assert api("GET", "/v1/memories/keys/home-city", query={"user_id": "alice"})[0] == 404
    _usable(api)
    assert service.queue is not None and service.queue.dead_letters() == []


def test_the_service_refuses_the_time_too_not_only_the_api(hostile) -> None:
    from datetime import datetime, timedelta, timezone

    _, service, _ = hostile
    late = datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14)))
    with pytest.raises(Exception, match="event_time"):
        service.put_key("acme", "alice", "k", "content", event_time=late)


# ----------------------------------------------- item 2: validated before the first write, one unit
def _text(template: str) -> str:
    """JSON text as written, with MARK and HUGE filled in (escapes stay escapes)."""
    return template.replace("MARK", MARK).replace("HUGE", HUGE)


SURROGATE_BODIES = {
    "metadata value": _text(
        '{"user_id": "alice", "metadata": {"k": "\\ud800"}, '
        '"messages": [{"role": "user", "content": "MARK The user moved to Tallinn."}]}'
    ),
    "message content": _text(
        '{"user_id": "alice", "messages": [{"role": "user", "content": "MARK \\udfff"}]}'
    ),
    "speaker": _text(
        '{"user_id": "alice", "messages": [{"role": "user", "speaker": "\\ud83d", "content": "MARK"}]}'
    ),
    "metadata key": _text(
        '{"user_id": "alice", "metadata": {"\\udc00": 1}, "messages": [{"role": "user", "content": "MARK"}]}'
    ),
}


@pytest.mark.parametrize("case", sorted(SURROGATE_BODIES))
def test_a_lone_surrogate_is_refused_before_anything_is_stored(hostile, case: str) -> None:
    api, _, settings = hostile
    before = table_counts(settings.db_path)
    status, answer = _raw(api, "POST", "/v1/memories", SURROGATE_BODIES[case])
    assert status == 422, answer
    assert answer["error"]["code"] == "validation_error"
    assert answer["error"]["details"][0]["type"] == "invalid_unicode"
    # Nothing stored, nothing owed: the outbox sweep has nothing to extract later.
    assert_no_trace(settings.db_path, before, MARK)
    _usable(api)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/v1/memories/keys/k", '{"user_id": "alice", "content": "\\ud800 x"}'),
        ("POST", "/v1/memories/search", '{"user_id": "alice", "query": "x \\ud800"}'),
        (
            "POST",
            "/v1/memories/search",
            '{"user_id": "alice", "query": "x", "filters": {"metadata": {"k": "\\udbff"}}}',
        ),
    ],
)
def test_lone_surrogates_are_422_on_every_route(hostile, method: str, path: str, body: str) -> None:
    api, _, settings = hostile
    before = table_counts(settings.db_path)
    status, answer = _raw(api, method, path, body)
    assert status == 422 and answer["error"]["details"][0]["type"] == "invalid_unicode", answer
    assert table_counts(settings.db_path) == before


def test_a_surrogate_in_a_list_filter_is_422(hostile) -> None:
    api, _, _ = hostile
    query = {"user_id": "alice", "metadata": '{"k": "\\ud800"}'}
    status, answer = api("GET", "/v1/memories", query=query)
    assert_error(status, answer, 422, "validation_error", "metadata.k")


def test_an_add_whose_index_write_fails_stores_none_of_it(faulty_service) -> None:
    """The STM entries and their turns are one unit: a failure of the second undoes the first."""
    service = faulty_service(store_faults={"put": Fail(DependencyFailed("index down"))})
    settings = service.settings
    api = build_api(service, settings)
    before = table_counts(settings.db_path)
    body = {"user_id": "alice", "messages": [{"id": "m1", "role": "user", "content": f"{MARK} in Tallinn"}]}
    status, answer = api("POST", "/v1/memories", body=body)
    assert status == 503, answer
    assert_no_trace(settings.db_path, before)  # its words may sit in a rolled-back page, never a row
    assert service.stm.get("acme", "alice", "m1") is None
    far = datetime(2199, 1, 1, tzinfo=UTC)
    assert (
        service.stm.stale_pending(
            service.settings.api.earliest_time, far, service.settings.api.earliest_time, 1000
        )
        == []
    )
    # The retry stores it whole, once.
    status, answer = api("POST", "/v1/memories", body=body)
    assert status == 202 and answer["stored"] == ["m1"], answer


# -------------------------------------------------------------------- item 6: huge integers
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/memories/search", _text('{"user_id": "alice", "query": "x", "top_k": HUGE}'), "top_k"),
        ("/v1/memories/search", _text('{"user_id": "alice", "query": "x", "min_score": HUGE}'), "min_score"),
        (
            "/v1/memories/search",
            _text('{"user_id": "alice", "query": "x", "filters": {"metadata": {"k": -HUGE}}}'),
            "filters.metadata.k",
        ),
        (
            "/v1/memories",
            _text(
                '{"user_id": "alice", "metadata": {"k": HUGE}, '
                '"messages": [{"role": "user", "content": "MARK"}]}'
            ),
            "metadata.k",
        ),
        (
            "/v1/memories",
            _text(
                '{"user_id": "alice", "metadata": {"k": 2POW}, '
                '"messages": [{"role": "user", "content": "MARK"}]}'
            ).replace("2POW", str(2**64)),
            "metadata.k",
        ),
    ],
)
def test_integers_too_large_are_422_naming_the_field(hostile, path: str, body: str, field: str) -> None:
    api, _, settings = hostile
    before = table_counts(settings.db_path)
    status, answer = _raw(api, "POST", path, body)
    assert status == 422, answer
    assert field in {d["field"] for d in answer["error"]["details"]}, answer
    assert_no_trace(settings.db_path, before, MARK)


def test_a_huge_integer_in_a_list_filter_is_422(hostile) -> None:
    api, _, _ = hostile
    status, answer = api("GET", "/v1/memories", query={"user_id": "alice", "metadata": _text('{"k": HUGE}')})
    assert status == 422, answer


def test_64_bit_integers_in_metadata_are_kept(hostile) -> None:
    api, _, _ = hostile
    body = {
        "user_id": "alice",
        "metadata": {"big": 2**63 - 1, "small": -(2**63)},
        "messages": [{"role": "user", "content": "x"}],
    }
    assert api("POST", "/v1/memories", body=body)[0] == 202
    status, page = api(
        "GET", "/v1/memories", query={"user_id": "alice", "metadata": json.dumps({"big": 2**63 - 1})}
    )
    assert status == 200 and page["memories"][0]["metadata"]["small"] == -(2**63)


# --------------------------------------------------------------- item 7: cursors cannot be forged
def _forge(inner: str, key: bytes, tenant: str = "acme", user: str = "alice") -> str:
    """A cursor signed as round two signed them: with the public fixed key."""
    mac = hmac.new(key, f"{tenant}\x1f{user}\x1f{inner}".encode(), hashlib.sha256).digest()[:16]
    return f"{inner}.{base64.urlsafe_b64encode(mac).decode().rstrip('=')}"


@pytest.mark.parametrize("key", ["1", "²", "١٢"])
def test_a_forged_cursor_is_400_even_signed_with_the_old_public_key(hostile, key: str) -> None:
    api, _, _ = hostile
    api("POST", "/v1/memories", body={"user_id": "alice", "messages": [{"role": "user", "content": "a"}]})
    inner = base64.urlsafe_b64encode(f"1.5|{key}".encode()).decode()
    cursor = _forge(inner, b"memstack-cursor-v1")
    status, answer = api("GET", "/v1/memories", query={"user_id": "alice", "cursor": cursor})
    assert_error(status, answer, 400, "bad_request", "cursor")


@pytest.mark.parametrize("key", ["²", "١٢", "⑦", "-1", "+1", " 1"])
def test_the_embedded_position_takes_ascii_digits_only(key: str) -> None:
    with pytest.raises(BadRequest):
        decode_row_position(base64.urlsafe_b64encode(f"1.5|{key}".encode()).decode())


def test_the_cursor_key_is_the_deployments_own_and_survives_a_restart(tmp_path: Path) -> None:
    cursors = {}
    for name in ("one", "two"):
        settings = load_settings(data_dir=tmp_path / name, embedder="hashing")
        service = build_service(settings)
        api = build_api(service, settings)
        body = {"user_id": "alice", "messages": [{"role": "user", "content": f"turn {i}"} for i in range(3)]}
        api("POST", "/v1/memories", body=body)
        status, page = api("GET", "/v1/memories", query={"user_id": "alice", "limit": "1"})
        assert status == 200 and page["next_cursor"]
        cursors[name] = page["next_cursor"]
        service.close()
        key_file = tmp_path / name / "cursor.key"
        assert len(key_file.read_bytes()) == 32 and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert (tmp_path / "one" / "cursor.key").read_bytes() != (tmp_path / "two" / "cursor.key").read_bytes()
    # The same directory after a restart takes its own cursor; the other deployment's is refused.
    settings = load_settings(data_dir=tmp_path / "one", embedder="hashing")
    service = build_service(settings)
    api = build_api(service, settings)
    assert api("GET", "/v1/memories", query={"user_id": "alice", "cursor": cursors["one"]})[0] == 200
    assert api("GET", "/v1/memories", query={"user_id": "alice", "cursor": cursors["two"]})[0] == 400
    service.close()


def test_the_cursor_key_comes_from_secrets_manager_when_configured(tmp_path: Path) -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="memstack-cursor", SecretString="k" * 48)["ARN"]
        settings = load_settings(
            data_dir=tmp_path / "d", embedder="hashing", cursor_secret_arn=arn, aws_region="us-east-1"
        )
        service = build_service(settings)
        signed = service.cursors.sign("acme", "alice", "abc")
        assert signed == CursorSigner(b"k" * 48).sign("acme", "alice", "abc")
        assert not (tmp_path / "d" / "cursor.key").exists()
        service.close()


def test_two_processes_creating_the_key_agree(tmp_path: Path) -> None:
    from memstack.adapters.cursor_key import local_key

    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                (tmp_path / f"k{os.getpid()}").write_bytes(local_key(tmp_path / "data"))
            except BaseException:
                code = 1
            os._exit(code)
        pids.append(pid)
    assert all(os.waitpid(pid, 0)[1] == 0 for pid in pids)
    keys = {(tmp_path / f"k{pid}").read_bytes() for pid in pids}
    assert keys == {(tmp_path / "data" / "cursor.key").read_bytes()}


# ------------------------------------------------------------ item 8: one decoding, one rule
@pytest.mark.parametrize("suffix", ["%0A", "\n", "%0D", "%00"])
def test_a_control_character_in_a_path_user_is_422_never_another_user(hostile, suffix: str) -> None:
    api, _, _ = hostile
    assert (
        api("POST", "/v1/memories", body={"user_id": "nlu", "messages": [{"role": "user", "content": "hi"}]})[
            0
        ]
        == 202
    )
    from urllib.parse import unquote

    status, answer = api("DELETE", f"/v1/users/nlu{unquote(suffix)}")
    assert_error(status, answer, 422, "validation_error", "user_id")
    status, page = api("GET", "/v1/memories", query={"user_id": "nlu"})
    assert status == 200 and len(page["memories"]) == 1, "the erase reached user nlu"
    status, answer = api("GET", "/v1/memories", query={"user_id": f"nlu{unquote(suffix)}"})
    assert_error(status, answer, 422, "validation_error", "user_id")


@pytest.mark.parametrize("key", ["café", "日本語", "emoji-🙂", "a b", "x&y=z", "tab\tkey"])
def test_unicode_keys_route_and_round_trip(hostile, key: str) -> None:
    api, _, _ = hostile
    status, answer = api("PUT", f"/v1/memories/keys/{key}", body={"user_id": "alice", "content": "v1"})
    if "\t" in key:  # a control character: the key's validation refuses it, as it would in a body
        assert_error(status, answer, 422, "validation_error", "key")
        return
    assert status == 201, answer
    assert answer["metadata"]["key"] == key
    status, answer = api("GET", f"/v1/memories/keys/{key}", query={"user_id": "alice"})
    assert status == 200 and answer["content"] == "v1"


# ---------------------------------------------------------------- item 9: no key in the log
def test_the_request_log_names_the_route_not_the_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from memstack.api.wsgi_server import WsgiApi

    settings = load_settings(data_dir=tmp_path / "d", embedder="hashing", api_keys="k=acme")
    service = build_service(settings)
    local = WsgiApi(service, settings)
    secret_key, secret_user = "keynamezq", "userzq"

    def call(method: str, path: str, body: dict | None = None, query: str = "") -> int:
        data = json.dumps(body).encode() if body is not None else b""
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path.encode().decode("latin-1"),
            "QUERY_STRING": query,
            "CONTENT_LENGTH": str(len(data)),
            "HTTP_AUTHORIZATION": "Bearer k",
            "wsgi.input": __import__("io").BytesIO(data),
        }
        seen = {}
        local(environ, lambda status, headers: seen.setdefault("status", status))
        return int(seen["status"].split()[0])

    caplog.set_level("INFO")
    caplog.clear()
    assert call("PUT", f"/v1/memories/keys/{secret_key}", {"user_id": secret_user, "content": "x"}) == 201
    assert call("GET", f"/v1/memories/keys/{secret_key}", query=f"user_id={secret_user}") == 200
    assert call("DELETE", f"/v1/users/{secret_user}") == 200
    assert call("GET", "/v1/nowhere/" + secret_key) == 404
    logged = [r.__dict__ for r in caplog.records if r.getMessage() == "http_request"]
    assert [r["route"] for r in logged] == [
        "/v1/memories/keys/<key>",
        "/v1/memories/keys/<key>",
        "/v1/users/<user_id>",
        "<no route>",
    ]
    text = "\n".join(json.dumps(r, default=str) for r in logged)
    assert "/v1/memories/keys/<key>" in text and "/v1/users/<user_id>" in text
    assert secret_key not in text and secret_user not in text
    local.close()
    service.close()


def test_non_ascii_paths_over_http_are_read_as_utf8(live_server: str) -> None:
    """Through waitress (WSGI hands the path over as latin-1 characters): "café" is "café", not "cafÃ©"."""
    import requests

    headers = {"X-Api-Key": "acme-key"}
    url = f"{live_server}/v1/memories/keys/caf%C3%A9"
    put = requests.put(url, json={"user_id": "alice", "content": "v1"}, headers=headers, timeout=30)
    assert put.status_code == 201, put.text
    assert put.json()["metadata"]["key"] == "café"
    got = requests.get(url, params={"user_id": "alice"}, headers=headers, timeout=30)
    assert got.status_code == 200 and got.json()["content"] == "v1"
    bad = requests.get(
        f"{live_server}/v1/memories/keys/%FF", params={"user_id": "a"}, headers=headers, timeout=30
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "bad_path"
    erase = requests.delete(f"{live_server}/v1/users/alice%0A", headers=headers, timeout=30)
    assert erase.status_code == 422
    assert requests.get(url, params={"user_id": "alice"}, headers=headers, timeout=30).status_code == 200


# ------------------------------------------------------------------ found probing a live server
@pytest.mark.parametrize(
    "method, path",
    [
        ("POST", "/v1/memories"),
        ("POST", "/v1/memories/search"),
        ("PUT", "/v1/memories/keys/k"),
        ("PATCH", "/v1/memories/m1"),
        ("POST", "/v1/consolidations"),
    ],
)
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "image/png"])
@pytest.mark.parametrize("body", [None, ""])
def test_an_empty_body_under_any_content_type_is_422_not_500(
    hostile, method: str, path: str, content_type: str, body: str | None
) -> None:
    """``curl -X POST -H 'Content-Type: text/plain'`` with no data answered 500 (unsupported content type)."""
    api, _, settings = hostile
    before = table_counts(settings.db_path)
    status, answer = api(method, path, body=body, headers={"Content-Type": content_type})
    assert_error(status, answer, 422, "validation_error", "body")
    assert table_counts(settings.db_path) == before


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Length: -1\r\n",
        b"Content-Length: 10\r\nContent-Length: 20\r\n",
        b"X-Api-Key: \x00\r\n",
        b"Idempotency-Key: a\nb\r\n",
    ],
)
def test_http_the_server_cannot_parse_is_answered_in_the_error_shape(live_server: str, header: bytes) -> None:
    """waitress's own 400s (before any route runs) were plain text; clients parse one shape."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(live_server)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Api-Key: acme-key\r\n"
            b"Content-Type: application/json\r\n" + header + b"\r\n{}"
        )
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"400", head  # HTTP/1.0 when the request line itself was unreadable
    assert b"content-type: application/json" in head.lower()
    answer = json.loads(body)
    assert answer["error"]["code"] == "bad_request" and answer["error"]["message"], answer
