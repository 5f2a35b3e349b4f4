"""The outbound policy of webhook deliveries: https, public addresses, the allow-list, no redirects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from memstack.adapters.webhooks.http_sender import PinnedHttpSender, public
from memstack.domain.webhooks.delivery import OutboundRefused, ReceiverFailed

PUBLIC = "93.184.215.14"


def _sender(
    addresses: list[str], answer: int = 200, **kwargs: object
) -> tuple[PinnedHttpSender, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def reply(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            answer, headers={"Location": "http://169.254.169.254/"} if answer == 302 else {}
        )

    client = httpx.Client(transport=httpx.MockTransport(reply))
    sender = PinnedHttpSender(resolver=lambda host, port: addresses, client=client, **kwargs)  # type: ignore[arg-type]
    return sender, seen


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",
        "::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
    ],
)
def test_a_name_that_resolves_to_an_internal_address_is_refused(address: str) -> None:
    sender, seen = _sender([PUBLIC, address])
    with pytest.raises(OutboundRefused, match="does not call"):
        sender.post("https://hooks.example.com/x", b"{}", {})
    assert seen == []  # not one byte sent


def test_http_is_refused_unless_the_host_is_allowed_by_name() -> None:
    sender, seen = _sender([PUBLIC])
    with pytest.raises(OutboundRefused, match="https only"):
        sender.post("http://hooks.example.com/x", b"{}", {})
    allowed, seen = _sender(["127.0.0.1"], allowed_hosts=["localhost"])
    assert allowed.post("http://localhost:8080/x?a=1", b"{}", {}) == 200
    assert str(seen[0].url) == "http://127.0.0.1:8080/x?a=1" and seen[0].headers["host"] == "localhost:8080"


def test_the_connection_goes_to_the_checked_address_with_the_name_for_tls() -> None:
    sender, seen = _sender([PUBLIC])
    assert sender.post("https://hooks.example.com/in?t=1", b'{"a":1}', {"webhook-id": "evt_1"}) == 200
    [request] = seen
    assert str(request.url) == f"https://{PUBLIC}/in?t=1"
    assert (
        request.headers["host"] == "hooks.example.com"
        and request.extensions["sni_hostname"] == "hooks.example.com"
    )
    assert request.headers["webhook-id"] == "evt_1" and request.content == b'{"a":1}'


def test_a_redirect_is_an_answer_not_followed() -> None:
    sender, seen = _sender([PUBLIC], answer=302)
    assert sender.post("https://hooks.example.com/x", b"{}", {}) == 302
    assert len(seen) == 1


def test_an_unresolvable_name_is_a_failed_delivery_to_retry() -> None:
    def nowhere(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    sender = PinnedHttpSender(resolver=nowhere)
    with pytest.raises(ReceiverFailed):
        sender.post("https://nowhere.invalid/x", b"{}", {})


def test_public_means_globally_routable() -> None:
    assert public(PUBLIC) and public("2606:4700::1111")
    assert not any(public(a) for a in ("127.0.0.1", "100.64.0.1", "224.0.0.1", "::ffff:10.0.0.1", "fe80::1"))


def test_building_a_service_does_not_import_the_http_client(tmp_path: Path) -> None:
    """Every function builds the webhook sender; only the webhook worker sends. httpx is ~10% of the
    API function's cold import, so it is imported on the first delivery (a fresh interpreter: this
    one has imported it already)."""
    script = (
        "import sys\n"
        "from memstack.factory import build_service\n"
        "from memstack.settings import load_settings\n"
        f"service = build_service(load_settings(data_dir={str(tmp_path)!r}, embedder='hashing'))\n"
        "assert 'webhook' in service.job_handlers\n"
        "service.close()\n"
        "print(sorted(m for m in sys.modules if m == 'httpx' or m.startswith('httpx.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
