"""Fixtures of the reliability suite: the API fixtures of tests/api, and services over faulty adapters."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.factory import build_service
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

from tests.api.conftest import api, small_api, small_limits  # noqa: F401  (pytest fixtures)
from tests.consolidation.test_dynamodb_stm import ddb  # noqa: F401  (pytest fixture: moto STM table)
from tests.reliability.faults import Fail, Faulty

ServiceFactory = Callable[..., MemoryService]


@pytest.fixture
def fast_settings(tmp_path: Path) -> Settings:
    """The hashing embedder, no backoff worth waiting for."""
    return load_settings(data_dir=tmp_path / "data", embedder="hashing")


@pytest.fixture
def faulty_service(fast_settings: Settings) -> Iterator[ServiceFactory]:
    """``faulty_service(store_faults={...}, stm_faults=, queue_faults=, **adapters)``: faults as planned.

    Each plan is ``{method: Fail | [Fail]}``; the wrapped adapters are on
    ``service.store``, ``service.stm`` and ``service.queue`` (``.calls``,
    ``.injected``, ``.real``).
    """
    made: list[tuple[MemoryService, Database]] = []

    def make(
        store_faults: dict[str, Fail | list[Fail]] | None = None,
        stm_faults: dict[str, Fail | list[Fail]] | None = None,
        queue_faults: dict[str, Fail | list[Fail]] | None = None,
        settings: Settings | None = None,
        **adapters: Any,
    ) -> MemoryService:
        s = settings or fast_settings
        db = Database(s.db_path)
        kwargs: dict[str, Any] = {
            "store": Faulty(EmbeddedMemoryStore(db), **(store_faults or {})),
            "stm": Faulty(EmbeddedShortTermStore(db), **(stm_faults or {})),
            "queue": Faulty(
                SqliteJobQueue(db, max_attempts=s.queue.queue_max_attempts, backoff_seconds=0.0),
                **(queue_faults or {}),
            ),
        }
        kwargs.update(adapters)
        service = build_service(s, **kwargs)
        made.append((service, db))
        return service

    yield make
    for service, db in made:
        service.close()
        db.close()
