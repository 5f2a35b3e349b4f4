"""``ports.store.implements``: what ``isinstance`` on a runtime-checkable port says, known per class."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from memstack.ports import store as store_ports
from memstack.ports.store import (
    CandidateReader,
    ExactVectors,
    HybridCandidates,
    RankedBm25,
    ReadView,
    implements,
    public_members,
)


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


class PartialStore:
    """A store with some of the optional extras: BM25 as columns, a read view, the hybrid round trip."""

    def bm25_ranked(self, tenant: str, user_id: str, query: str, k: int, filters: Any) -> Any:
        return None

    def read_view(self, tenant: str, user_id: str) -> Any:
        return self

    def hybrid_candidates(self, *args: Any) -> Any:
        return [], []

    # One of CandidateReader's three methods only: it does not implement that port.
    def full_vectors(self, tenant: str, user_id: str, ids: list[str]) -> Any:
        return [], None


def _store_ports() -> list[type]:
    """Every optional extra ``memstack.ports.store`` declares (its runtime-checkable ports)."""
    return [
        value
        for value in vars(store_ports).values()
        if isinstance(value, type) and Protocol in value.__mro__[1:] and value is not store_ports.MemoryStore
    ]


def test_a_store_implements_the_extras_it_defines_and_no_others() -> None:
    ports = _store_ports()
    assert len(ports) >= 12  # every extra is looked at, not a few
    implemented = {RankedBm25, ReadView, HybridCandidates}
    wrapped = Proxy(PartialStore())
    for _ in range(2):  # the second time from the per-class answer
        for port in ports:
            for obj in (PartialStore(), wrapped):
                assert implements(obj, port) == (port in implemented) == isinstance(obj, port), port.__name__


@runtime_checkable
class Base(Protocol):
    limit: int

    def first(self) -> None: ...


@runtime_checkable
class Extended(Base, Protocol):
    def second(self) -> None: ...

    def __len__(self) -> int: ...


def test_public_members_are_the_ports_own_and_inherited_names() -> None:
    assert public_members(Extended) == {"limit", "first", "second"}
    assert public_members(CandidateReader) == {"candidates", "full_vectors", "derived"}
    assert public_members(ReadView) == {"read_view"}


class Unsized:
    """``first`` and ``second`` but no ``__len__``: only ``isinstance`` sees what it lacks."""

    limit = 1

    def first(self) -> None: ...

    def second(self) -> None: ...


def test_a_member_public_members_leaves_out_is_still_asked_of_isinstance() -> None:
    class Sized(Unsized):
        def __len__(self) -> int:
            return 0

    assert not implements(Unsized(), Extended) and implements(Sized(), Extended)
