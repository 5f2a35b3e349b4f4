"""``MemoryClient``: the memstack REST API from Python (blocking, httpx), with typed results.

Local server (API key)::

    client = MemoryClient("http://127.0.0.1:8000", api_key="dev-key")

API Gateway (IAM, each attempt signed with SigV4 for ``execute-api``)::

    client = MemoryClient("https://abc123.execute-api.eu-west-1.amazonaws.com/prod", aws_region="eu-west-1")

Every failure answer becomes a ``MemoryApiError`` carrying the API's error
``code``; throttling, unavailable dependencies and broken connections are
retried as ``RetryPolicy`` says. Argument order follows Mem0's client
(``add(messages, user_id=...)``, ``search(query, user_id=...)``).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx

from memstack.api.schemas import (
    AddMemoriesResponse,
    ImportUserResponse,
    JobStatusResponse,
    Memory,
    UserSummary,
)
from memstack.client import calls
from memstack.client.base import DEFAULT_TIMEOUT, ClientCore, cut_off
from memstack.client.binding import sync_method
from memstack.client.calls import ApiCall
from memstack.client.job_wait import JobWait
from memstack.client.retry import RetryPolicy

T = TypeVar("T")


class MemoryClient(ClientCore):
    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        aws_region: str | None = None,
        aws_credentials: Any = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``api_key`` for the local server; ``aws_region`` (optional botocore credentials) for SigV4.

        ``transport`` replaces the network (``httpx.MockTransport`` in tests;
        ``memstack.client.in_process.in_process_client`` passes the API of a service in this process).
        """
        super().__init__(base_url, api_key, aws_region, aws_credentials, timeout, retry, headers)
        self._sleep = sleep
        self._http = httpx.Client(**self._http_options, transport=transport)

    def call(self, call: ApiCall[T]) -> T:
        """Send one described call (with retries); returns its typed answer or raises ``MemoryApiError``."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(**self._request_args(call))
            except httpx.TransportError as exc:
                delay = self._delay_or_raise(call, attempt, exc)
            else:
                answer, retry_in = self._answer_or_delay(call, attempt, response)
                if retry_in is None:
                    return answer
                delay = retry_in
            self._sleep(delay)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Any route; returns the decoded JSON answer or raises ``MemoryApiError``."""
        return self.call(calls.raw(method, path, body=body, query=query, headers=headers))

    add = sync_method(calls.add)
    search = sync_method(calls.search)
    list = sync_method(calls.list_memories)
    get = sync_method(calls.get)
    update = sync_method(calls.update)
    delete = sync_method(calls.delete)
    delete_all = sync_method(calls.delete_all)
    history = sync_method(calls.history)
    put_key = sync_method(calls.put_key)
    get_key = sync_method(calls.get_key)
    delete_key = sync_method(calls.delete_key)
    list_users = sync_method(calls.list_users)
    erase_user = sync_method(calls.erase_user)
    consolidate = sync_method(calls.consolidate)
    health = sync_method(calls.health)
    get_config = sync_method(calls.get_config)
    put_config = sync_method(calls.put_config)
    patch_config = sync_method(calls.patch_config)
    job = sync_method(calls.job)

    def wait_for_jobs(
        self, jobs: AddMemoriesResponse | Sequence[str], *, timeout: float | None = 60.0, poll: float = 0.5
    ) -> builtins.list[JobStatusResponse]:
        """Ask for each job's state until every one is done or failed; their last states.

        ``jobs``: an add's answer or job ids. A failed job is returned (its ``error`` says why), not
        raised; ``TimeoutError`` when one is still queued or running after ``timeout`` s (None: no limit).
        """
        wait = JobWait(jobs, timeout, poll)
        while True:
            for job_id in wait.unfinished():
                wait.saw(self.call(calls.job(job_id)))
            if not wait.unfinished():
                return wait.results()
            self._sleep(wait.delay())

    def iter_memories(self, *, user_id: str, page_size: int = 100, **filters: Any) -> Iterator[Memory]:
        """Every current memory, following the cursor page by page."""
        cursor = None
        while True:
            page = self.call(calls.list_memories(user_id=user_id, limit=page_size, cursor=cursor, **filters))
            yield from page.memories
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def iter_users(self, *, page_size: int = 100) -> Iterator[UserSummary]:
        """Every user of this tenant, following the cursor page by page."""
        cursor = None
        while True:
            page = self.call(calls.list_users(limit=page_size, cursor=cursor))
            yield from page.users
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def export_user(
        self, user_id: str, *, embeddings: bool = True, page_size: int | None = None
    ) -> Iterator[str]:
        """The user's export as lines (a header, then every record), page after page.

        Write them to a file and ``memstack import`` or ``import_user`` reads it. ``memstack
        serve`` streams the whole export in one answer; behind API Gateway each answer is a
        page (``page_size`` versions at most) and this follows its cursor.
        """
        cursor: str | None = None
        first = True
        while True:
            call = calls.export_user(user_id, cursor=cursor, limit=page_size, embeddings=embeddings)
            with self._streamed(call) as response:
                lines = self._lines(response)
                header, cursor = calls.export_header_line(next(lines))
                if first:
                    yield header
                    first = False
                yield from lines
            if not cursor:
                return

    def import_user(
        self, user_id: str, lines: Iterable[str], *, request_bytes: int = calls.IMPORT_REQUEST_BYTES
    ) -> ImportUserResponse:
        """Import an export's lines as ``user_id``, in requests of about ``request_bytes``; the totals."""
        answers = (
            self.call(calls.import_user(user_id, body))
            for body in calls.import_requests(lines, request_bytes)
        )
        return calls.summed(user_id, answers)

    @contextmanager
    def _streamed(self, call: ApiCall[Any]) -> Iterator[httpx.Response]:
        """The answer of ``call`` before its body is read (retried as ``call`` is, until it begins)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.send(self._http.build_request(**self._request_args(call)), stream=True)
            except httpx.TransportError as exc:
                delay = self._delay_or_raise(call, attempt, exc)
            else:
                if response.status_code < 400:
                    try:
                        yield response
                    finally:
                        response.close()
                    return
                response.read()
                response.close()
                delay = self._delay_after(call, attempt, response)
            self._sleep(delay)

    @staticmethod
    def _lines(response: httpx.Response) -> Iterator[str]:
        try:
            yield from (line for line in response.iter_lines() if line.strip())
        except httpx.TransportError as exc:
            raise cut_off(response, exc) from exc

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
