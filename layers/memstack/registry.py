"""The providers of one port by the name settings give them, each imported only when chosen.

``factory`` holds one ``Registry`` per port (embedders, rerankers, extractors,
summarisers, memory stores, short-term stores, leases, job queues). An entry is
``"name": "module:builder"``; the builder lives in the provider's own module and
takes the settings, the ready-made clients (``factory.Clients``, a plain mapping
here) and what else that port's builders take (the embedder for an extractor,
the STM for a store, the SQLite file for what keeps its data there).
Importing lazily keeps a Lambda that uses DynamoDB from importing torch, and
the laptop from needing opensearch-py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Builders of one port's providers, by name."""

    def __init__(self, kind: str, providers: Mapping[str, str]) -> None:
        self.kind = kind
        self._providers = dict(providers)

    def names(self) -> frozenset[str]:
        return frozenset(self._providers)

    def builder(self, name: str) -> Callable[..., T]:
        """The named provider's builder (its module imported now); ``NotImplementedError`` for none."""
        target = self._providers.get(name)
        if target is None:
            raise NotImplementedError(f"{self.kind} {name!r} is not available in this build")
        module, _, attribute = target.partition(":")
        built: Callable[..., T] = getattr(importlib.import_module(module), attribute)
        return built

    def build(self, name: str, *args: Any) -> T:
        return self.builder(name)(*args)
