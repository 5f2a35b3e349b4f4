"""Shared fixtures: a fresh embedded store in a temp dir, with the fast hashing embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from memstack.factory import build_service
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

# The session PostgreSQL server and per-test schemas (tests/postgres_fixtures.py).
pytest_plugins = ["tests.postgres_fixtures"]


@pytest.fixture(autouse=True)
def _no_ambient_memstack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests build their settings explicitly; a developer's MEMSTACK_* must not leak in."""
    import os

    for name in list(os.environ):
        if name.startswith("MEMSTACK_"):
            monkeypatch.delenv(name)
    # No 16 MiB reserve file in each of the suite's hundreds of data directories; the tests of the
    # reserve (tests/reliability/test_exhaustion.py) set their own.
    monkeypatch.setenv("MEMSTACK_STORAGE_RESERVE_BYTES", "0")
    # moto and boto3 must never reach a real account from a test.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(autouse=True)
def _restore_memstack_log_level() -> Iterator[None]:
    """The CLI quietens the ``memstack`` logger process-wide; do not let that leak between tests."""
    import logging

    logger = logging.getLogger("memstack")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(data_dir=tmp_path / "data", embedder="hashing")


@pytest.fixture
def service(settings: Settings) -> Iterator[MemoryService]:
    svc = build_service(settings)
    try:
        yield svc
    finally:
        svc.close()
