"""The local job queue: jobs persisted in the SQLite file, run by a worker thread.

Jobs survive a restart (they are rows, not objects in memory). A failing job
is retried with exponential backoff up to ``max_attempts`` times, then moved
to the dead-letter list (``status = 'dead'``) where ``memstack dlq list``
shows it and ``memstack dlq redrive`` puts it back.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from memstack.adapters.embedded.database import Database
from memstack.ports.queue import Job


class LocalJobQueue:
    def __init__(self, db: Database, max_attempts: int = 3, backoff_seconds: float = 0.5) -> None:
        self.db = db
        self.max_attempts = max_attempts
        self.backoff_seconds = backoff_seconds
        self._handler: Callable[[Job], None] | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._run_lock = threading.Lock()

    # ----------------------------------------------------------------- the port
    def send(self, jobs: list[Job]) -> None:
        now = time.time()
        with self.db.write() as conn:
            conn.executemany(
                "INSERT OR IGNORE INTO jobs (id, body, status, attempts, available_at, created_at) "
                "VALUES (?, ?, 'pending', 0, ?, ?)",
                [(j.id, j.model_dump_json(), now, now) for j in jobs],
            )
        self._wake.set()

    def set_handler(self, handler: Callable[[Job], None]) -> None:
        self._handler = handler

    def pending(self) -> int:
        row = self.db.read().execute("SELECT COUNT(*) AS n FROM jobs WHERE status = 'pending'").fetchone()
        return int(row["n"])

    def drain(self, timeout: float | None = None) -> bool:
        """Run jobs in this thread (or wait for the worker) until none is pending."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.pending():
            if deadline is not None and time.monotonic() > deadline:
                return False
            if not self.run_ready() and self.pending():
                time.sleep(min(self.backoff_seconds, 0.05))
        return True

    def dead_letters(self) -> list[dict[str, Any]]:
        rows = self.db.read().execute(
            "SELECT id, body, attempts, last_error, created_at FROM jobs WHERE status = 'dead' "
            "ORDER BY created_at"
        )
        return [
            {"id": r["id"], "job": json.loads(r["body"]), "attempts": r["attempts"], "error": r["last_error"]}
            for r in rows
        ]

    def redrive(self) -> int:
        with self.db.write() as conn:
            n = conn.execute(
                "UPDATE jobs SET status = 'pending', attempts = 0, available_at = ? WHERE status = 'dead'",
                (time.time(),),
            ).rowcount
        self._wake.set()
        return n

    # -------------------------------------------------------------- processing
    def _claim(self) -> tuple[Job, int] | None:
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT id, body, attempts FROM jobs WHERE status = 'pending' AND available_at <= ? "
                "ORDER BY available_at, created_at LIMIT 1",
                (time.time(),),
            ).fetchone()
            if row is None:
                return None
            # Lease the job so a second worker does not take it while this one runs.
            conn.execute("UPDATE jobs SET available_at = ? WHERE id = ?", (time.time() + 300.0, row["id"]))
        return Job.model_validate_json(row["body"]), int(row["attempts"])

    def run_ready(self) -> int:
        """Run every job that is ready now; returns how many ran."""
        if self._handler is None:
            raise RuntimeError("no job handler is set on the local queue")
        ran = 0
        with self._run_lock:
            while (claimed := self._claim()) is not None:
                job, attempts = claimed
                ran += 1
                try:
                    self._handler(job)
                except Exception as exc:  # a failed job is retried, then dead-lettered
                    attempts += 1
                    dead = attempts >= self.max_attempts
                    with self.db.write() as conn:
                        conn.execute(
                            "UPDATE jobs SET attempts = ?, status = ?, available_at = ?, last_error = ? "
                            "WHERE id = ?",
                            (
                                attempts,
                                "dead" if dead else "pending",
                                time.time() + self.backoff_seconds * (2 ** (attempts - 1)),
                                f"{type(exc).__name__}: {exc}"[:2000],
                                job.id,
                            ),
                        )
                else:
                    with self.db.write() as conn:
                        conn.execute("DELETE FROM jobs WHERE id = ?", (job.id,))
        return ran

    def start_worker(self, poll_seconds: float = 1.0) -> None:
        """Process jobs in a daemon thread (``memstack serve`` uses this)."""
        if self._worker is not None:
            return

        def loop() -> None:
            while not self._stop.is_set():
                self.run_ready()
                self._wake.wait(poll_seconds)
                self._wake.clear()

        self._worker = threading.Thread(target=loop, name="memstack-local-queue", daemon=True)
        self._worker.start()

    def stop_worker(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._worker is not None:
            self._worker.join(timeout=10)
            self._worker = None
