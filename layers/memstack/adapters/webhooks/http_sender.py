"""Webhook POSTs that cannot be pointed at the deployment's own network.

The outbound policy (docs/api.md, "Webhooks"): a receiver is reached over
https, at public addresses only, unless its host is in
``MEMSTACK_WEBHOOK_ALLOWED_HOSTS`` (then http and any address are allowed:
a receiver on the same machine, in a VPC, in tests). A tenant's URL could
otherwise name ``localhost``, ``169.254.169.254`` (instance metadata, the
Lambda runtime API), or a private service, and have memstack call it.

The name is resolved once; every address it resolves to must be allowed,
and the connection is made to the checked address (TLS still verifies the
certificate against the name, sent as SNI), so DNS cannot answer one address
to the check and another to the connection. Redirects are not followed (a
3xx is a failed delivery), and at most 64 KB of an answer is read.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from memstack.domain.webhooks.delivery import OutboundRefused, ReceiverFailed

if TYPE_CHECKING:  # imported on the first delivery: the API function builds a sender it never uses
    import httpx

USER_AGENT = "memstack-webhooks/1"
_ANSWER_BYTES = 65_536

Resolver = Callable[[str, int], list[str]]


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class PinnedHttpSender:
    def __init__(
        self,
        allowed_hosts: Collection[str] = (),
        timeout_seconds: float = 10.0,
        resolver: Resolver = resolve,
        client: httpx.Client | None = None,
    ) -> None:
        self.allowed_hosts = frozenset(h.lower().strip("[]") for h in allowed_hosts)
        self.timeout_seconds = timeout_seconds
        self.resolver = resolver
        self._client = client

    @property
    def client(self) -> httpx.Client:
        if self._client is None:  # made on first use; kept, so a warm worker reuses its pool
            import httpx

            self._client = httpx.Client(follow_redirects=False, trust_env=False)
        return self._client

    def post(self, url: str, body: bytes, headers: dict[str, str]) -> int:
        import httpx

        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        https = parts.scheme == "https"
        allowed = host in self.allowed_hosts
        if parts.scheme not in ("https", "http") or not host:
            raise OutboundRefused(f"webhook URL {url!r} is not an http(s) URL")
        if not https and not allowed:
            raise OutboundRefused(
                f"webhook receiver {host} is reached over https only (MEMSTACK_WEBHOOK_ALLOWED_HOSTS lists "
                "hosts allowed over http)"
            )
        port = parts.port or (443 if https else 80)
        try:
            addresses = self.resolver(host, port)
        except OSError as exc:
            raise ReceiverFailed(f"webhook receiver {host} does not resolve ({exc})") from None
        refused = [a for a in addresses if not (allowed or public(a))]
        if refused or not addresses:
            raise OutboundRefused(
                f"webhook receiver {host} resolves to an address this deployment does not call "
                f"({', '.join(refused) or 'none'}): only public addresses, or hosts in "
                "MEMSTACK_WEBHOOK_ALLOWED_HOSTS"
            )
        address = addresses[0]
        literal = f"[{address}]" if ":" in address else address
        target = parts._replace(netloc=f"{literal}:{port}", fragment="").geturl()
        sent = {**headers, "Host": parts.netloc, "User-Agent": USER_AGENT}
        try:
            # To the checked address; TLS sends and verifies the receiver's own name (SNI).
            with self.client.stream(
                "POST",
                target,
                content=body,
                headers=sent,
                timeout=httpx.Timeout(self.timeout_seconds, connect=min(5.0, self.timeout_seconds)),
                extensions={"sni_hostname": host} if https else {},
            ) as answer:
                read = 0
                for chunk in answer.iter_bytes():
                    read += len(chunk)
                    if read >= _ANSWER_BYTES:
                        break
                return answer.status_code
        except httpx.HTTPError as exc:
            raise ReceiverFailed(f"webhook receiver {host} did not answer ({type(exc).__name__})") from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
