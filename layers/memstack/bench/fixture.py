"""A throw-away embedded store in a temporary directory, filled with the synthetic conversation."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from memstack.bench.corpus import Corpus
from memstack.evaluation.embedding_cache import CachedEmbedder
from memstack.factory import build_embedder, build_service
from memstack.service import MemoryService
from memstack.settings import Settings, load_settings

TENANT = "bench"
#: turns per ``service.add`` while filling a store (one write transaction each)
FILL_BATCH = 200
#: turns per conversation session
SESSION_TURNS = 500


def user_name(index: int) -> str:
    return f"user{index}"


class BenchStore:
    """The embedded default, as a new user runs it, in its own data directory."""

    def __init__(
        self,
        embedder: str = "hashing",
        data_dir: Path | None = None,
        *,
        embedding_cache: Path | None = None,
        **settings: Any,
    ) -> None:
        """``embedding_cache``: keep the turns' vectors there and reuse them next run (a slow
        model's 100,000 turns are hours of embedding on a small machine; the timed searches
        embed their query as usual, and a cached query costs a lookup instead)."""
        self._tmp = tempfile.TemporaryDirectory(prefix="memstack-bench-") if data_dir is None else None
        self.data_dir = Path(self._tmp.name) if self._tmp is not None else Path(data_dir or ".")
        self.settings: Settings = load_settings(data_dir=self.data_dir, embedder=embedder, **settings)
        self._cache: CachedEmbedder | None = None
        if embedding_cache is not None:
            self._cache = CachedEmbedder(build_embedder(self.settings), embedding_cache)
        self.service: MemoryService = build_service(self.settings, embedder=self._cache)
        self.corpus = Corpus()
        self.sizes: dict[str, int] = {}

    def grow(self, user: int, total: int) -> float:
        """Add turns until ``user`` has ``total`` memories; returns the seconds it took."""
        name = user_name(user)
        have = self.sizes.get(name, 0)
        started = time.perf_counter()
        # Each user says different things: their turns come from different parts of the corpus.
        offset = user * 10_000_000
        while have < total:
            n = min(FILL_BATCH, total - have)
            batch = list(self.corpus.messages(n, offset=offset + have, prefix=f"{name}-"))
            self.service.add(TENANT, name, batch, session_id=f"session-{have // SESSION_TURNS}", infer=False)
            have += n
        self.sizes[name] = have
        return time.perf_counter() - started

    @staticmethod
    def queries(n: int) -> list[str]:
        """The benchmark's questions (the same on every run)."""
        return Corpus().queries(n)

    def close(self) -> None:
        self.service.close()
        if self._cache is not None:
            self._cache.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> BenchStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
