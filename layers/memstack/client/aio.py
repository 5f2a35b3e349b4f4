"""``AsyncMemoryClient``: the same API and behaviour as ``MemoryClient``, for asyncio code (httpx).

::

    async with AsyncMemoryClient("http://127.0.0.1:8000", api_key="dev-key") as client:
        await client.add("I'm vegetarian.", user_id="ann", sync=True)
        hits = await client.search("what does she eat?", user_id="ann")
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
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
from memstack.client.binding import async_method
from memstack.client.calls import ApiCall
from memstack.client.job_wait import JobWait
from memstack.client.retry import RetryPolicy

T = TypeVar("T")


class AsyncMemoryClient(ClientCore):
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
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """The arguments of ``MemoryClient``; ``transport`` is an async httpx transport."""
        super().__init__(base_url, api_key, aws_region, aws_credentials, timeout, retry, headers)
        self._sleep = sleep
        self._http = httpx.AsyncClient(**self._http_options, transport=transport)

    async def call(self, call: ApiCall[T]) -> T:
        """Send one described call (with retries); returns its typed answer or raises ``MemoryApiError``."""
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._http.request(**self._request_args(call))
            except httpx.TransportError as exc:
                delay = self._delay_or_raise(call, attempt, exc)
            else:
                answer, retry_in = self._answer_or_delay(call, attempt, response)
                if retry_in is None:
                    return answer
                delay = retry_in
            await self._sleep(delay)

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Any route; returns the decoded JSON answer or raises ``MemoryApiError``."""
        return await self.call(calls.raw(method, path, body=body, query=query, headers=headers))

    add = async_method(calls.add)
    search = async_method(calls.search)
    list = async_method(calls.list_memories)
    get = async_method(calls.get)
    update = async_method(calls.update)
    delete = async_method(calls.delete)
    delete_all = async_method(calls.delete_all)
    history = async_method(calls.history)
    put_key = async_method(calls.put_key)
    get_key = async_method(calls.get_key)
    delete_key = async_method(calls.delete_key)
    list_users = async_method(calls.list_users)
    erase_user = async_method(calls.erase_user)
    consolidate = async_method(calls.consolidate)
    health = async_method(calls.health)
    get_config = async_method(calls.get_config)
    put_config = async_method(calls.put_config)
    patch_config = async_method(calls.patch_config)
    job = async_method(calls.job)

    async def wait_for_jobs(
        self, jobs: AddMemoriesResponse | Sequence[str], *, timeout: float | None = 60.0, poll: float = 0.5
    ) -> builtins.list[JobStatusResponse]:
        """Ask for each job's state until every one is done or failed; their last states.

        ``jobs``: an add's answer or job ids. A failed job is returned (its ``error`` says why), not
        raised; ``TimeoutError`` when one is still queued or running after ``timeout`` s (None: no limit).
        """
        wait = JobWait(jobs, timeout, poll)
        while True:
            for job_id in wait.unfinished():
                wait.saw(await self.call(calls.job(job_id)))
            if not wait.unfinished():
                return wait.results()
            await self._sleep(wait.delay())

    async def iter_memories(
        self, *, user_id: str, page_size: int = 100, **filters: Any
    ) -> AsyncIterator[Memory]:
        """Every current memory, following the cursor page by page."""
        cursor = None
        while True:
            page = await self.call(
                calls.list_memories(user_id=user_id, limit=page_size, cursor=cursor, **filters)
            )
            for memory in page.memories:
                yield memory
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def iter_users(self, *, page_size: int = 100) -> AsyncIterator[UserSummary]:
        """Every user of this tenant, following the cursor page by page."""
        cursor = None
        while True:
            page = await self.call(calls.list_users(limit=page_size, cursor=cursor))
            for user in page.users:
                yield user
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def export_user(
        self, user_id: str, *, embeddings: bool = True, page_size: int | None = None
    ) -> AsyncIterator[str]:
        """The user's export as lines (a header, then every record), page after page (``MemoryClient``'s)."""
        cursor: str | None = None
        first = True
        while True:
            call = calls.export_user(user_id, cursor=cursor, limit=page_size, embeddings=embeddings)
            async with self._streamed(call) as response:
                lines = self._lines(response)
                header, cursor = calls.export_header_line(await anext(lines))
                if first:
                    yield header
                    first = False
                async for line in lines:
                    yield line
            if not cursor:
                return

    async def import_user(
        self, user_id: str, lines: Iterable[str], *, request_bytes: int = calls.IMPORT_REQUEST_BYTES
    ) -> ImportUserResponse:
        """Import an export's lines as ``user_id``, in requests of about ``request_bytes``; the totals."""
        answers = [
            await self.call(calls.import_user(user_id, body))
            for body in calls.import_requests(lines, request_bytes)
        ]
        return calls.summed(user_id, answers)

    @asynccontextmanager
    async def _streamed(self, call: ApiCall[Any]) -> AsyncIterator[httpx.Response]:
        """The answer of ``call`` before its body is read (retried as ``call`` is, until it begins)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                request = self._http.build_request(**self._request_args(call))
                response = await self._http.send(request, stream=True)
            except httpx.TransportError as exc:
                delay = self._delay_or_raise(call, attempt, exc)
            else:
                if response.status_code < 400:
                    try:
                        yield response
                    finally:
                        await response.aclose()
                    return
                await response.aread()
                await response.aclose()
                delay = self._delay_after(call, attempt, response)
            await self._sleep(delay)

    @staticmethod
    async def _lines(response: httpx.Response) -> AsyncIterator[str]:
        try:
            async for line in response.aiter_lines():
                if line.strip():
                    yield line
        except httpx.TransportError as exc:
            raise cut_off(response, exc) from exc

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
