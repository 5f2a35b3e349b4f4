"""``ports.store.implements``: what ``isinstance`` on a runtime-checkable port says, known per class."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from memstack.ports.store import CandidateReader, ExactVectors, ReadView, implements


class Full:
    def read_view(self, tenant: str, user_id: str) -> Any:
        return self


class Bare:
    pass


class Slotted:
    """No ``__dict__``: nothing but its class can give it a member."""

    __slots__ = ()


class Proxy:
    """Forwards every attribute to what it wraps: only the instance knows what it has."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@runtime_checkable
class WithData(Protocol):
    size: int


class Sized:
    def __init__(self) -> None:
        self.size = 3


def test_implements_answers_as_isinstance_for_classes_proxies_and_instances() -> None:
    bare_with_method = Bare()
    bare_with_method.read_view = lambda tenant, user_id: None  # type: ignore[attr-defined]
    cases: list[tuple[object, type]] = [
        (Full(), ReadView),
        (Bare(), ReadView),
        (bare_with_method, ReadView),  # an instance attribute supplies the method
        (Bare(), ReadView),  # ...and does not make its class implement it
        (Slotted(), ReadView),
        (Proxy(Full()), ReadView),
        (Proxy(Bare()), ReadView),
        (Full(), CandidateReader),
        (Full(), ExactVectors),
        (Sized(), WithData),  # a port with data members: never decided by the class
        (Bare(), WithData),
        (Proxy(Sized()), WithData),
        (Proxy(Bare()), WithData),
    ]
    for _ in range(2):  # the second time from the per-class answer
        for obj, port in cases:
            assert implements(obj, port) == isinstance(obj, port), (type(obj).__name__, port.__name__)
    assert implements(Full(), ReadView) and not implements(Bare(), ReadView)
    assert implements(Proxy(Full()), ReadView) and not implements(Proxy(Bare()), ReadView)
