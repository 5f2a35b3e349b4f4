"""Client methods made from the call builders, with the builders' signatures (for IDEs and mypy)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from memstack.client.calls import ApiCall

P = ParamSpec("P")
T = TypeVar("T")


class SyncCaller(Protocol):
    def call(self, call: ApiCall[T]) -> T: ...


class AsyncCaller(Protocol):
    async def call(self, call: ApiCall[T]) -> T: ...


SyncT = TypeVar("SyncT", bound=SyncCaller)
AsyncT = TypeVar("AsyncT", bound=AsyncCaller)


def sync_method(builder: Callable[P, ApiCall[T]]) -> Callable[Concatenate[SyncT, P], T]:
    def method(self: SyncT, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.call(builder(*args, **kwargs))

    method.__name__ = builder.__name__
    method.__doc__ = builder.__doc__
    return method


def async_method(
    builder: Callable[P, ApiCall[T]],
) -> Callable[Concatenate[AsyncT, P], Coroutine[Any, Any, T]]:
    async def method(self: AsyncT, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.call(builder(*args, **kwargs))

    method.__name__ = builder.__name__
    method.__doc__ = builder.__doc__
    return method
