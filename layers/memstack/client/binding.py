"""Client methods made from the call builders, with the builders' signatures (for IDEs and mypy)."""

from __future__ import annotations

import inspect
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

    return _named_like(method, builder)


def async_method(
    builder: Callable[P, ApiCall[T]],
) -> Callable[Concatenate[AsyncT, P], Coroutine[Any, Any, T]]:
    async def method(self: AsyncT, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.call(builder(*args, **kwargs))

    return _named_like(method, builder)


def _named_like(method: Callable[..., Any], builder: Callable[..., Any]) -> Any:
    """The builder's name, docstring and parameters on the method, for help(), IDEs and notebooks.

    Without ``__signature__`` the runtime sees ``(self, *args, **kwargs)``. ``functools.wraps``
    would not do: through ``__wrapped__`` a bound method would lose the builder's first parameter.
    """
    method.__name__ = builder.__name__
    method.__doc__ = builder.__doc__
    signature = inspect.signature(builder)
    own = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(parameters=[own, *signature.parameters.values()])  # type: ignore[attr-defined]
    return method
