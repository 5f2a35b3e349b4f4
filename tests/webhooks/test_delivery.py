"""Webhooks on the embedded backend, to a real HTTP receiver: signed, retried, dead-lettered, per tenant."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from memstack.api.app import close_app
from memstack.domain.consolidation.profiles import PROFILE
from memstack.domain.webhooks.signature import WebhookVerificationError, new_secret, verify
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message, Tier
from memstack.ports.queue import Job
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

from tests.api.conftest import Api, add_body, build_api
from tests.consolidation.conftest import NOW, conversation
from tests.webhooks.receiver import Delivery, Receiver, receiving

EVERY_EVENT = ["memory.created", "memory.updated", "memory.deleted", "job.failed"]
WORDS = "I adopted a greyhound called Biscuit"
POTTERY = "I tried pottery for the first time."


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(
        data_dir=tmp_path / "data",
        embedder="hashing",
        queue_max_attempts=2,
        # The test's receivers listen on the loopback address, over http: allowed by name.
        webhook_allowed_hosts="127.0.0.1",
        webhook_max_attempts=3,
        webhook_backoff_seconds=0,
    )


@pytest.fixture
def service(settings: Settings) -> Iterator[MemoryService]:
    svc = build_service(settings)
    yield svc
    svc.close()


@pytest.fixture
def api(service: MemoryService, settings: Settings) -> Iterator[Api]:
    client = build_api(service, settings)
    yield client
    close_app(client.app)


def _subscribe(
    api: Api, receiver: Receiver, *, key: str = "acme-key", events: list[str] | None = None
) -> str:
    secret = new_secret()
    hooks = {"url": receiver.url, "secret": secret, "events": events or EVERY_EVENT}
    status, body = api("PATCH", "/v1/config", body={"webhooks": hooks}, key=key)
    assert status == 200, body
    assert body["config"]["webhooks"]["secret"] == "**********"  # never shown back
    return secret


def _events(deliveries: list[Delivery], secret: str) -> list[dict[str, Any]]:
    """Each delivery verified with ``secret`` (a real receiver's check), then its event."""
    for d in deliveries:
        verify(secret, d.headers, d.body)
    return [json.loads(d.body) for d in deliveries]


def _drain(service: MemoryService) -> None:
    assert service.queue is not None and service.queue.drain(timeout=120)


def test_memory_events_reach_their_tenants_receiver_signed_and_nothing_else(
    api: Api, service: MemoryService
) -> None:
    with receiving() as acme, receiving() as globex:
        acme_secret = _subscribe(api, acme)
        globex_secret = _subscribe(api, globex, key="globex-key")
        api("POST", "/v1/memories", body=add_body("alice", f"{WORDS}."))
        _drain(service)
        created = _events(acme.deliveries, acme_secret)
        assert [e["type"] for e in created] == ["memory.created"] * len(created) and created
        event = created[0]
        assert event["user_id"] == "alice" and event["data"]["version"] == 1
        assert set(event) == {"id", "type", "created_at", "user_id", "data"}  # no tenant, no content
        assert "greyhound" not in acme.deliveries[0].body.decode().lower()
        assert globex.deliveries == []  # another tenant's receiver hears nothing of acme

        memory_id = event["data"]["memory_id"]
        status, new = api(
            "PATCH", f"/v1/memories/{memory_id}", body={"user_id": "alice", "content": "Biscuit."}
        )
        assert status == 200, new
        assert api("DELETE", f"/v1/memories/{new['id']}", query={"user_id": "alice"})[0] == 200
        _drain(service)
        later = _events(acme.deliveries[len(created) :], acme_secret)
        assert [(e["type"], e["data"]["memory_id"]) for e in later] == [
            ("memory.updated", new["id"]),
            ("memory.deleted", new["id"]),
        ]
        assert later[0]["data"]["replaces_id"] == memory_id

        api("POST", "/v1/memories", body=add_body("dave", "I moved to Oslo."), key="globex-key")
        _drain(service)
        assert {e["user_id"] for e in _events(globex.deliveries, globex_secret)} == {"dave"}
        assert len(acme.deliveries) == len(created) + 2
        # Signed with each tenant's own key: acme's secret does not verify globex's deliveries.
        with pytest.raises(WebhookVerificationError):
            verify(acme_secret, globex.deliveries[0].headers, globex.deliveries[0].body)


def test_a_failing_receiver_is_retried_with_the_same_event_id(api: Api, service: MemoryService) -> None:
    with receiving() as receiver:
        receiver.answers = [500, 503]  # then 200
        secret = _subscribe(api, receiver, events=["memory.created"])
        assert api("PUT", "/v1/memories/keys/pet", body={"user_id": "alice", "content": "A dog."})[0] == 201
        _drain(service)
        events = _events(receiver.deliveries, secret)
        assert len(events) == 3 and len({e["id"] for e in events}) == 1, events
        assert {d.headers["webhook-id"] for d in receiver.deliveries} == {events[0]["id"]}
        assert service.queue is not None and service.queue.dead_letters("acme") == []


def test_a_receiver_that_keeps_failing_dead_letters_the_delivery_and_no_event_is_made_of_that(
    api: Api, service: MemoryService, settings: Settings
) -> None:
    with receiving() as receiver:
        receiver.then = 500
        _subscribe(api, receiver)
        api("PUT", "/v1/memories/keys/pet", body={"user_id": "alice", "content": "A dog."})
        _drain(service)
        assert receiver.count() == settings.webhooks.webhook_max_attempts
        dead = api("GET", "/v1/jobs")[1]["dead_lettered"]
        assert [(d["type"], d["user_id"]) for d in dead] == [("webhook", "alice")], dead
        assert "receiver_failed" in dead[0]["error"] or "500" in dead[0]["error"]
        # A delivery that failed is no job anyone follows: no "job.failed" event comes of it.
        assert receiver.count() == settings.webhooks.webhook_max_attempts
        receiver.then = 200
        assert api("POST", "/v1/jobs/redrive", body={"job_ids": [dead[0]["id"]]})[1] == {"redriven": 1}
        _drain(service)
        assert receiver.count() == settings.webhooks.webhook_max_attempts + 1
        assert api("GET", "/v1/jobs")[1]["dead_lettered"] == []


def test_a_job_that_fails_for_good_is_an_event_with_its_error(api: Api, service: MemoryService) -> None:
    def broken(job: Job) -> None:
        raise RuntimeError(f"model down: {WORDS}")

    service.job_handlers["extract"] = broken
    with receiving() as receiver:
        secret = _subscribe(api, receiver, events=["job.failed"])
        [job_id] = api("POST", "/v1/memories", body=add_body("alice", f"{WORDS}."))[1]["job_ids"]
        _drain(service)
        [event] = _events(receiver.deliveries, secret)
        assert event["type"] == "job.failed" and event["user_id"] == "alice"
        assert event["data"]["job_id"] == job_id and event["data"]["error"]["code"] == "internal_error"
        assert "Biscuit" not in receiver.deliveries[0].body.decode()


def test_erasing_a_user_drops_their_queued_deliveries(api: Api, service: MemoryService) -> None:
    with receiving() as receiver:
        _subscribe(api, receiver, events=["memory.created"])
        api("PUT", "/v1/memories/keys/pet", body={"user_id": "alice", "content": "A dog."})
        assert api("DELETE", "/v1/users/alice")[0] == 200
        _drain(service)
        assert receiver.deliveries == []


def test_a_tenant_without_webhooks_queues_nothing(api: Api, service: MemoryService) -> None:
    api("PUT", "/v1/memories/keys/pet", body={"user_id": "alice", "content": "A dog."})
    assert service.queue is not None
    assert [j for j in service.queue.waiting("acme") or [] if j["job"]["type"] == "webhook"] == []


def test_the_webhook_section_is_checked_when_written(api: Api) -> None:
    for hooks, field in (
        ({"url": "ftp://example.com/x", "secret": new_secret(), "events": ["memory.created"]}, "url"),
        ({"url": "https://user:pw@example.com/x", "secret": new_secret()}, "url"),
        ({"url": "https://example.com/x", "secret": "**********"}, "webhooks"),
        ({"url": "https://example.com/x", "events": ["memory.created"]}, "webhooks"),
        ({"url": "https://example.com/x", "secret": new_secret(), "events": ["memory.exploded"]}, "events"),
    ):
        status, body = api("PATCH", "/v1/config", body={"webhooks": hooks})
        assert status == 422, (hooks, body)
        assert field in json.dumps(body["error"]), body


def test_verify_refuses_a_changed_body_a_wrong_key_and_an_old_delivery() -> None:
    from memstack.domain.webhooks.signature import signed_headers

    secret = new_secret()
    body = b'{"id":"evt_1"}'
    headers = signed_headers(secret, "evt_1", 1_800_000_000, body)
    verify(secret, headers, body, now=1_800_000_100)
    for args, now in (
        ((secret, headers, b'{"id":"evt_2"}'), 1_800_000_100),
        ((new_secret(), headers, body), 1_800_000_100),
        ((secret, headers, body), 1_800_000_000 + 301),  # five minutes late: a replay
        ((secret, {**headers, "webhook-signature": "v1,AAAA"}, body), 1_800_000_100),
    ):
        with pytest.raises(WebhookVerificationError):
            verify(*args, now=now)


def test_the_signature_is_the_standard_webhooks_one() -> None:
    """The worked example of Svix's manual verification docs (the Standard Webhooks scheme): any
    Standard Webhooks library accepts what memstack signs."""
    from memstack.domain.webhooks.signature import signature

    secret, msg_id, timestamp = (
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
    )
    body = b'{"test": 2432232314}'
    assert signature(secret, msg_id, timestamp, body) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


class _ErasedAt:
    """An erasure log (the DynamoDB STM's, in AWS) that says when one user was erased."""

    def __init__(self, user_id: str, at: float) -> None:
        self.user_id, self.at = user_id, at

    def erased_at(self, tenant: str, user_id: str) -> float | None:
        return self.at if user_id == self.user_id else None


def test_a_queued_delivery_is_dropped_when_its_user_was_erased_or_its_event_is_no_longer_asked_for(
    api: Api, service: MemoryService
) -> None:
    """SQS cannot pick an erased user's deliveries out of the queue: the delivery reads the erasure log."""
    from datetime import UTC, datetime

    from memstack.adapters.webhooks.http_sender import PinnedHttpSender
    from memstack.domain.webhooks.delivery import WebhookDelivery
    from memstack.domain.webhooks.events import EventType, WebhookEvent
    from memstack.domain.webhooks.publisher import delivery_job

    with receiving() as receiver:
        _subscribe(api, receiver, events=["memory.created"])
        erased = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
        sender = PinnedHttpSender(["127.0.0.1"])
        deliver = WebhookDelivery(service.tenant_configs, sender, _ErasedAt("alice", erased))

        def event(user_id: str, day: int, kind: EventType = "memory.created") -> Job:
            made = WebhookEvent(
                type=kind, created_at=datetime(2026, 12, day, tzinfo=UTC), user_id=user_id, data={}
            )
            return delivery_job("acme", made)

        deliver(event("alice", 1))  # made as (or before) alice was erased: dropped
        deliver(event("bob", 1))  # another user: delivered
        deliver(event("alice", 2))  # alice again, after her erase: delivered
        deliver(event("bob", 2, "memory.deleted"))  # not asked for (any more): dropped
        sender.close()
        assert [json.loads(d.body)["user_id"] for d in receiver.deliveries] == ["bob", "alice"]


def test_consolidation_summaries_and_profiles_make_events(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data",
        embedder="hashing",
        webhook_allowed_hosts="127.0.0.1",
        profile_memories=True,
    )
    service = build_service(settings)
    api = build_api(service, settings)
    try:
        with receiving() as receiver:
            secret = _subscribe(api, receiver, events=["memory.created", "memory.updated"])
            # Raw turns only: consolidation summarises them (extraction wrote nothing of them).
            service.add("acme", "sam", conversation(), infer=False)
            summarised = service.consolidate("acme", "sam", now=NOW)["memory_ids"]
            # Two sessions' hobbies of one person: a profile memory.
            day1 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
            for week, (mid, text) in enumerate([("a1", "I went swimming with the kids."), ("a2", POTTERY)]):
                said = Message(id=mid, speaker="Mel", content=text, timestamp=day1 + timedelta(days=7 * week))
                service.add("acme", "alice", [said], infer=True, sync=True)
            service.consolidate("acme", "alice", now=day1 + timedelta(days=8))
            _drain(service)
            records, _ = service.store.list("acme", "alice", MemoryFilters(tier=Tier.LTM), 500, None)
            profiles = [r.id for r in records if r.metadata.get("consolidation") == PROFILE]
            assert summarised and profiles
            created = {e["data"]["memory_id"] for e in _events(receiver.deliveries, secret)}
            assert set(summarised) | set(profiles) <= created
    finally:
        close_app(api.app)
        service.close()
