"""Mem0 OSS's side of ``scripts/compare_mem0.py``: runs in a throwaway venv, never in memstack's.

    python -m venv /tmp/mem0-venv
    /tmp/mem0-venv/bin/pip install mem0ai==2.2.1 faiss-cpu==1.15.1

Reads one JSON command per line on stdin, answers one JSON line on stdout:

- ``{"op": "load", "file": npz}``: add the rows (``ids``, ``texts``, ``vectors``, ``created``)
  to the Memory's FAISS store in one insert, each with the payload ``Memory.add(infer=False)``
  writes (``_create_memory``: data, hash, created/updated, lemmatised text, user_id, role).
  One insert, because FAISS's store rewrites its whole index file after every insert.
- ``{"op": "search", "query": text, "vector": [...]}``: times ``Memory.search(query,
  top_k=10, filters={"user_id": ...})`` with the embedder answering the given vector (the
  query's embedding is excluded, as on memstack's side), and the bare ``faiss`` top-10 of the
  same vector (Mem0's own floor). Answers both in milliseconds, wall clock and this process's
  CPU time (every thread: Mem0 may search on a worker thread), and the hit texts.

No LLM or embedding service is called (``infer=False`` paths only; telemetry off).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("OPENAI_API_KEY", "unused-no-call-is-made")

import numpy as np
from mem0 import Memory
from mem0.utils.lemmatization import lemmatize_for_bm25

USER = "user0"


class GivenVector:
    """Mem0's embedder interface, answering the vector the next search was sent with."""

    def __init__(self) -> None:
        self.vector: list[float] = []

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self.vector

    def embed_batch(self, texts: list[str], memory_action: str | None = None) -> list[list[float]]:
        return [self.vector for _ in texts]


def build(dims: int, root: str) -> tuple[Any, GivenVector]:
    memory = Memory.from_config(
        {
            "vector_store": {
                "provider": "faiss",
                "config": {
                    "collection_name": "bench",
                    "path": os.path.join(root, "faiss"),
                    "distance_strategy": "cosine",
                    "embedding_model_dims": dims,
                },
            },
            "history_db_path": os.path.join(root, "history.db"),
        }
    )
    given = GivenVector()
    memory.embedding_model = given
    return memory, given


def load(memory: Any, path: str) -> int:
    data = np.load(path, allow_pickle=False)
    ids, texts, created = data["ids"].tolist(), data["texts"].tolist(), data["created"].tolist()
    payloads = []
    for text, when in zip(texts, created, strict=True):
        payloads.append(
            {
                "data": text,
                "hash": hashlib.md5(text.encode()).hexdigest(),
                "created_at": when,
                "updated_at": when,
                "text_lemmatized": lemmatize_for_bm25(text),
                "user_id": USER,
                "role": "user",
            }
        )
    memory.vector_store.insert(vectors=data["vectors"].tolist(), ids=ids, payloads=payloads)
    return int(memory.vector_store.index.ntotal)


def search(memory: Any, given: GivenVector, query: str, vector: list[float]) -> dict[str, Any]:
    given.vector = vector
    started, cpu = time.perf_counter(), time.process_time()
    found = memory.search(query, top_k=10, filters={"user_id": USER})
    mem0_ms, mem0_cpu_ms = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
    q = np.asarray([vector], dtype=np.float32)
    started, cpu = time.perf_counter(), time.process_time()
    memory.vector_store.index.search(q, 10)
    faiss_ms, faiss_cpu_ms = (time.perf_counter() - started) * 1000, (time.process_time() - cpu) * 1000
    return {
        "mem0_ms": mem0_ms,
        "faiss_ms": faiss_ms,
        "mem0_cpu_ms": mem0_cpu_ms,
        "faiss_cpu_ms": faiss_cpu_ms,
        "hits": [r["memory"] for r in found["results"]],
    }


def main() -> None:
    dims = int(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="mem0-peer-") as root:
        memory, given = build(dims, root)
        print(json.dumps({"ready": True}), flush=True)
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd["op"] == "load":
                out: dict[str, Any] = {"rows": load(memory, cmd["file"])}
            elif cmd["op"] == "search":
                out = search(memory, given, cmd["query"], cmd["vector"])
            else:
                out = {"error": f"unknown op {cmd['op']!r}"}
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
