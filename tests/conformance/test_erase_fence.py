"""The erase rule of the ``MemoryStore`` port, run against every backend (conftest.py lists them).

Work that began before a user's erasure must not write for that user again:
each store refuses such a write in the same transaction (or condition) as the
write, so nothing of it is stored, and says so with ``Erased``. Work that
began after the erasure, and writes without a fence, are not refused. The fence
is an argument of the write (``fence=Fence.at(when the work began)``).

Every backend runs them: those of conftest.py, and both OpenSearch flavours on
the recorded wire (tests/infra/opensearch_wire.py: the real opensearch-py client,
its requests answered in memory as OpenSearch would), so the cases run without a
cluster too. The serverless store is fenced by the STM's erasure log (DynamoDB,
moto), which the service erases first: its fixture erases in that order.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from memstack.domain import versions
from memstack.domain.erasure import Erased, Fence

from .conftest import BACKENDS, COARSE_DIM, backend_params, open_backend
from .opensearch_wire_stores import WIRED
from .test_store_conformance import EMB, rec

#: conftest's live serverless store has no erasure log (the contract's other cases need none), and a
#: collection's fence is that log: its erase cases are the wire case's, which is wired as the service is
FENCED = {
    **{name: open_ for name, open_ in BACKENDS.items() if name != "opensearch-serverless"},
    **WIRED,
}


@pytest.fixture(params=backend_params(FENCED))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """Every backend of conftest.py, and both OpenSearch flavours on the recorded wire."""
    yield from open_backend(FENCED, request, tmp_path)


def _erased_while_working(store: Any) -> datetime:
    """A record of t1/u1 stored, then the user erased; returns a time before the erase."""
    before = datetime.now(UTC) - timedelta(seconds=30)
    store.put([rec("I live in Lisbon")])
    store.erase_user("t1", "u1")
    return before


def test_a_put_from_work_that_began_before_the_erase_is_refused_and_stores_nothing(store: Any) -> None:
    before = _erased_while_working(store)
    late = rec("I live in Porto")
    with pytest.raises(Erased):
        store.put([late], fence=Fence.at(before))
    assert store.get("t1", "u1", late.id) is None


def test_a_supersede_from_work_that_began_before_the_erase_is_refused(store: Any) -> None:
    old = rec("I work as a baker")
    before = datetime.now(UTC) - timedelta(seconds=30)
    store.put([old])
    new = versions.new_version(old, content="I work as a chef", embedder=EMB, coarse_dim=COARSE_DIM)
    # The user is erased and starts again: the old version is back (a re-import), the job is not.
    store.erase_user("t1", "u1")
    store.put([old])
    with pytest.raises(Erased):
        store.supersede("t1", "u1", old.id, new, fence=Fence.at(before))
    assert store.get("t1", "u1", new.id) is None
    current = store.get("t1", "u1", old.id)
    assert current is not None and current.is_current


def test_work_that_began_after_the_erase_and_undeclared_writes_are_not_fenced(store: Any) -> None:
    _erased_while_working(store)
    fresh, imported = rec("I live in Porto"), rec("I have a cat")
    store.put([fresh], fence=Fence.at(datetime.now(UTC) + timedelta(seconds=1)))
    store.put([imported])  # outside declared work (an import, a test)
    assert store.get("t1", "u1", fresh.id) is not None and store.get("t1", "u1", imported.id) is not None


def test_the_fence_is_per_user(store: Any) -> None:
    before = _erased_while_working(store)
    other_user, other_tenant = rec("I live in Oslo", user="u2"), rec("I live in Rome", tenant="t2")
    store.put([other_user], fence=Fence.at(before))
    store.put([other_tenant], fence=Fence.at(before))
    assert store.get("t1", "u2", other_user.id) is not None
    assert store.get("t2", "u1", other_tenant.id) is not None
