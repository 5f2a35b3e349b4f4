"""An on-disk cache of embeddings for repeated evaluation runs (``memstack eval locomo --cache-dir``).

Embedding every LoCoMo turn is most of an evaluation's ingest time, and the
same texts are embedded again on every run. This wrapper keeps each vector in
one SQLite file per model (keyed by a hash of the text), so a second run with
the same embedder reads them back. It is an evaluation aid only: the product
never caches embeddings on disk.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from pathlib import Path

import numpy as np

from memstack.ports.embedder import Embedder


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class CachedEmbedder:
    """An ``Embedder`` that remembers every vector it computed in ``cache_dir``."""

    def __init__(self, inner: Embedder, cache_dir: Path | str) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.name = inner.name
        safe = re.sub(r"[^\w.-]+", "_", f"{inner.name}-{inner.dim}")
        path = Path(cache_dir) / f"embeddings-{safe}.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self.hits = 0
        self.misses = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return self.inner.embed(texts)
        keys = [_key(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk
                ):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        if missing:
            vectors = self.inner.embed(missing)
            fresh = {_key(t): np.asarray(v, dtype=np.float32) for t, v in zip(missing, vectors, strict=True)}
            with self._lock, self._db:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors (key, vector) VALUES (?, ?)",
                    [(k, v.tobytes()) for k, v in fresh.items()],
                )
            found.update(fresh)
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        return np.vstack([found[k] for k in keys])

    def close(self) -> None:
        with self._lock:
            self._db.close()
