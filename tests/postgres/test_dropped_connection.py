"""The database drops the connection in the middle of a request: a clear 503, and a retry works."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from memstack.api.app import close_app
from memstack.factory import build_service
from memstack.models import Message

from tests.api.conftest import build_api
from tests.waiting import wait_until

from .conftest import backends_waiting_on_lock, service_settings

SEARCH = {"user_id": "ann", "query": "where does Ann live", "top_k": 3}


def test_a_connection_killed_mid_request_is_a_503_and_the_retry_succeeds(
    tmp_path: Path, postgres_server: Any, postgres_schema: str, admin: Any
) -> None:
    settings = service_settings(tmp_path / "data", postgres_server, postgres_schema, postgres_pool_size=1)
    service = build_service(settings)
    api = build_api(service, settings)
    try:
        service.add("acme", "ann", [Message(content="I moved to Osaka last week.", speaker="Ann")])
        status, body = api("POST", "/v1/memories/search", body=SEARCH)
        assert status == 200 and body["results"]

        # Block the table, let the search start and wait on it, then kill its connection.
        admin.execute("BEGIN")
        admin.execute(f"LOCK TABLE {postgres_schema}.memories IN ACCESS EXCLUSIVE MODE")
        answer: dict[str, Any] = {}

        def search() -> None:
            answer["status"], answer["body"] = api("POST", "/v1/memories/search", body=SEARCH)

        request = threading.Thread(target=search)
        request.start()
        wait_until(
            lambda: len(backends_waiting_on_lock(admin)) == 1,
            what="the search to wait on the table lock",
        )
        (victim,) = backends_waiting_on_lock(admin)
        admin.execute("SELECT pg_terminate_backend(%s)", (victim,))
        request.join(timeout=60)
        admin.execute("ROLLBACK")

        assert answer["status"] == 503
        error = answer["body"]["error"]
        assert error["code"] == "dependency_failed"
        assert (
            "memory database is unavailable" in error["message"] and "retrying it is safe" in error["message"]
        )

        status, body = api("POST", "/v1/memories/search", body=SEARCH)
        assert status == 200
        assert "Osaka" in body["results"][0]["content"]
    finally:
        close_app(api.app)
        service.close()
