"""GET /v1/jobs/{id} on the embedded backend: an add's job ids, their states, error, tenancy, erase, TTL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from memstack.api.wsgi_server import make_server, running_in_thread
from memstack.client import AsyncMemoryClient, MemoryClient
from memstack.factory import build_service
from memstack.ports.job_status import JobStatus
from memstack.ports.queue import Job
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

from tests.api.conftest import Api, add_body, build_api

SECRET_WORDS = "the quetzal password is hunter2"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # Retries without waiting, so a failing job reaches the dead-letter list in one drain.
    return load_settings(data_dir=tmp_path / "data", embedder="hashing", queue_max_attempts=2)


def _fail_extraction(service: MemoryService) -> list[float]:
    """Extraction fails; the queue's clock is the returned cell (a test moves it past the backoff)."""

    def broken(job: Job) -> None:
        raise RuntimeError(f"model down while reading: {SECRET_WORDS}")

    service.job_handlers["extract"] = broken
    now = [time.time()]
    service.queue.clock = lambda: now[0]  # type: ignore[union-attr]
    return now


def test_an_add_returns_its_job_ids_and_each_goes_queued_running_done(
    api: Api, service: MemoryService
) -> None:
    seen: list[str] = []
    extract = service.job_handlers["extract"]

    def watching(job: Job) -> None:
        body = api("GET", f"/v1/jobs/{job.id}")[1]
        seen.append(body["status"])
        extract(job)

    service.job_handlers["extract"] = watching
    status, added = api("POST", "/v1/memories", body=add_body("alice", "I moved to Lisbon.", "I like figs."))
    assert status == 202 and added["queued"] == 2 and len(added["job_ids"]) == 2, added
    for job_id in added["job_ids"]:
        status, body = api("GET", f"/v1/jobs/{job_id}")
        assert status == 200, body
        assert (body["status"], body["type"], body["user_id"], body["attempts"]) == (
            "queued",
            "extract",
            "alice",
            0,
        )
    assert service.queue is not None and service.queue.drain(timeout=60)
    assert seen == ["running", "running"]
    for job_id in added["job_ids"]:
        body = api("GET", f"/v1/jobs/{job_id}")[1]
        assert (body["status"], body["attempts"], body["error"]) == ("done", 1, None), body
        assert datetime.fromisoformat(body["expires_at"]) > datetime.now(UTC) + timedelta(days=6)

    # Without extraction nothing is queued: no job ids (the fields an old client reads are unchanged).
    status, stored = api("POST", "/v1/memories", body=add_body("alice", "Noted.", infer=False))
    assert (status, stored["status"], stored["queued"], stored["job_ids"]) == (202, "stored", 0, [])


def test_a_failing_job_is_retried_then_failed_with_an_error_a_person_can_read(
    api: Api, service: MemoryService
) -> None:
    clock = _fail_extraction(service)
    [job_id] = api("POST", "/v1/memories", body=add_body("alice", "I moved to Lisbon."))[1]["job_ids"]
    assert service.queue is not None
    assert service.queue.run_ready([job_id]) == 1  # the first attempt; the retry waits for its backoff
    body = api("GET", f"/v1/jobs/{job_id}")[1]
    assert (body["status"], body["attempts"], body["error"]["code"]) == ("queued", 1, "internal_error"), body
    assert "will be retried" in body["error"]["message"]

    clock[0] += 60
    assert service.queue.drain(timeout=60, job_ids=[job_id])
    body = api("GET", f"/v1/jobs/{job_id}")[1]
    assert (body["status"], body["attempts"], body["error"]["code"]) == ("failed", 2, "internal_error"), body
    assert "dead-lettered" in body["error"]["message"] and job_id in body["error"]["message"]
    # The exception's own text (internals, or the user's words) never reaches the caller.
    assert SECRET_WORDS not in str(body) and "RuntimeError" not in str(body)
    assert [j["id"] for j in api("GET", "/v1/jobs")[1]["dead_lettered"]] == [job_id]

    assert api("POST", "/v1/jobs/redrive", body={"job_ids": [job_id]})[1] == {"redriven": 1}
    assert api("GET", f"/v1/jobs/{job_id}")[1]["status"] == "queued"


def test_another_tenants_job_is_not_found(api: Api) -> None:
    [job_id] = api("POST", "/v1/memories", body=add_body("alice"))[1]["job_ids"]
    status, body = api("GET", f"/v1/jobs/{job_id}", key="globex-key")
    assert status == 404 and body["error"]["code"] == "not_found", body
    assert api("GET", "/v1/jobs/no-such-job")[0] == 404
    assert api("GET", f"/v1/jobs/{job_id}", query={"user_id": "alice"})[0] == 422  # no filters to guess


def test_a_consolidation_on_request_is_followed_by_its_job_id(api: Api, service: MemoryService) -> None:
    api("POST", "/v1/memories", body=add_body("alice", infer=False))
    status, queued = api("POST", "/v1/consolidations", body={"user_id": "alice", "sync": False})
    assert status == 202, queued
    assert api("GET", f"/v1/jobs/{queued['job_id']}")[1]["status"] == "queued"
    assert service.queue is not None and service.queue.drain(timeout=60)
    assert api("GET", f"/v1/jobs/{queued['job_id']}")[1]["status"] == "done"


def test_erase_removes_the_users_job_states_and_a_late_worker_writes_none_back(
    api: Api, service: MemoryService
) -> None:
    [gone] = api("POST", "/v1/memories", body=add_body("alice"))[1]["job_ids"]
    [kept] = api("POST", "/v1/memories", body=add_body("bob"))[1]["job_ids"]
    status, erased = api("DELETE", "/v1/users/alice")
    assert status == 200 and erased["erased"]["job_statuses"] == 1, erased
    assert api("GET", f"/v1/jobs/{gone}")[0] == 404
    assert api("GET", f"/v1/jobs/{kept}")[1]["status"] == "queued"
    # A worker that had the job before the erase reports on: nothing is recreated.
    assert service.job_recorder is not None
    service.job_recorder.done(Job(id=gone, type="extract", tenant="acme", user_id="alice"), 1)
    assert api("GET", f"/v1/jobs/{gone}")[0] == 404
    rows = service.job_recorder.statuses.db.read().execute(  # type: ignore[attr-defined]
        "SELECT COUNT(*) FROM job_status WHERE user_id = 'alice'"
    )
    assert rows.fetchone()[0] == 0


def test_an_expired_job_state_is_not_shown_and_is_deleted_on_the_next_write(
    api: Api, service: MemoryService
) -> None:
    assert service.job_recorder is not None
    statuses = service.job_recorder.statuses
    past = datetime.now(UTC) - timedelta(days=8)
    old = JobStatus(
        id="old-job",
        tenant="acme",
        user_id="alice",
        type="extract",
        state="done",
        queued_at=past,
        updated_at=past,
        expires_at=past + timedelta(days=7),
    )
    statuses.put([old])
    assert statuses.get("acme", "old-job") is not None
    assert api("GET", "/v1/jobs/old-job")[0] == 404
    api("POST", "/v1/memories", body=add_body("alice"))  # records a new job: the expired one goes
    assert statuses.get("acme", "old-job") is None


@pytest.fixture
def served(service: MemoryService, settings: Settings) -> Iterator[str]:
    """``service`` behind the real local server (waitress on a free port); yields its base URL."""
    server, app = make_server(service, settings.updated(api_keys="acme-key=acme"), host="127.0.0.1", port=0)
    try:
        with running_in_thread(server) as url:
            yield url
    finally:
        app.close()


def test_both_python_clients_wait_for_an_adds_jobs(served: str, service: MemoryService) -> None:
    assert service.queue is not None
    service.queue.start_worker(poll_seconds=0.05)  # type: ignore[attr-defined]
    try:
        with MemoryClient(served, api_key="acme-key") as client:
            added = client.add("I moved to Lisbon in March.", user_id="alice")
            assert added.job_ids and client.job(added.job_ids[0]).id == added.job_ids[0]
            states = client.wait_for_jobs(added, timeout=60, poll=0.05)
            assert [(s.id, s.status) for s in states] == [(added.job_ids[0], "done")]

        async def run() -> list[str]:
            async with AsyncMemoryClient(served, api_key="acme-key") as aclient:
                more = await aclient.add("I adopted a cat named Miso.", user_id="alice")
                assert (await aclient.job(more.job_ids[0])).user_id == "alice"
                done = await aclient.wait_for_jobs(more.job_ids, timeout=60, poll=0.05)
                return [s.status for s in done]

        assert asyncio.run(run()) == ["done"]
    finally:
        service.queue.stop_worker()  # type: ignore[attr-defined]


def test_waiting_for_a_job_that_never_runs_times_out_naming_it(served: str) -> None:
    with MemoryClient(served, api_key="acme-key") as client:
        added = client.add("I moved to Lisbon in March.", user_id="alice")  # no worker is running
        with pytest.raises(TimeoutError, match=added.job_ids[0]):
            client.wait_for_jobs(added, timeout=0.2, poll=0.05)


def test_an_api_built_again_over_the_same_file_still_answers(settings: Settings) -> None:
    first = build_service(settings)
    api = build_api(first, settings)
    [job_id] = api("POST", "/v1/memories", body=add_body("alice"))[1]["job_ids"]
    first.close()
    second = build_service(settings)
    try:
        assert build_api(second, settings)("GET", f"/v1/jobs/{job_id}")[1]["status"] == "queued"
    finally:
        second.close()
