"""The SQLite job queue (``MEMSTACK_QUEUE_BACKEND=local``): jobs persisted in the SQLite file, run by
a worker thread.

Jobs survive a restart (they are rows, not objects in memory). A worker
claims a job with a short lease (``lease_seconds``, default 15 s) and a
heartbeat renews it while the job runs; the lease of a worker that died
(``kill -9``, a power cut) simply runs out, and the job is claimed again
within seconds. Every claim counts as an attempt, so a job that kills its
worker every time is dead-lettered after ``max_attempts`` too.

A failing job is retried with exponential backoff up to ``max_attempts``
times, then moved to the dead-letter list (``status = 'dead'``) where
``memstack dlq list`` shows it and ``memstack dlq redrive`` puts it back.
Sending a job id that is already dead-lettered puts it back the same way (a
client's retry of the add that queued it asks for exactly that).

With a ``recorder`` (``domain/jobs.py``) each job's state is reported as it
changes: queued when it is inserted or put back, running when claimed, done,
queued again after a failed attempt, failed when dead-lettered.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.migrations import ensure_columns
from memstack.domain.heartbeat import LeaseKeeper
from memstack.domain.jobs import WORKER_LOST, JobRecorder
from memstack.ports.queue import Job

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

# Still owed: waiting for its time, or claimed by a worker (whose lease may have run out).
_OPEN = "status IN ('pending', 'running')"


class SqliteJobQueue:
    def __init__(
        self,
        db: Database,
        max_attempts: int = 3,
        backoff_seconds: float = 0.5,
        retries: dict[str, tuple[int, float]] | None = None,
        lease_seconds: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.max_attempts = max_attempts
        self.backoff_seconds = backoff_seconds
        #: (attempts, first backoff) of a job type that retries otherwise (webhook deliveries wait longer)
        self.retries = dict(retries or {})
        self.lease_seconds = lease_seconds
        self.clock = clock
        ensure_columns(db, "jobs", {"lease_token": "TEXT", "user_key": "TEXT"})
        self._handler: Callable[[Job], None] | None = None
        self._wake = threading.Event()
        self._finished = threading.Condition()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._heartbeat = LeaseKeeper(lease_seconds / 3, name="memstack-job-heartbeat")
        self.recorder: JobRecorder | None = None

    # ----------------------------------------------------------------- the port
    def send(self, jobs: list[Job]) -> None:
        now = self.clock()
        with self.db.write() as conn:
            sent = [
                job
                for job in jobs
                if conn.execute(
                    "INSERT INTO jobs (id, body, status, attempts, available_at, created_at, user_key) "
                    "VALUES (?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET status = 'pending', "
                    "attempts = 0, available_at = excluded.available_at WHERE jobs.status = 'dead' "
                    "RETURNING id",
                    (job.id, job.model_dump_json(), now, now, _user_key(job)),
                ).fetchall()
            ]
            # Only what was inserted or put back: a job already waiting or running keeps its state.
            # In the same transaction, so no worker claims a job before its record exists.
            if self.recorder is not None:
                self.recorder.queued(sent)
        self._wake.set()

    def set_handler(self, handler: Callable[[Job], None]) -> None:
        self._handler = handler

    def pending(self, job_ids: list[str] | None = None) -> int:
        """Jobs still owed (waiting or running): all of them, or those among ``job_ids``."""
        conn = self.db.read()
        if job_ids is None:
            return int(conn.execute(f"SELECT COUNT(*) AS n FROM jobs WHERE {_OPEN}").fetchone()["n"])
        n = 0
        for start in range(0, len(job_ids), 500):
            chunk = job_ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            n += conn.execute(
                f"SELECT COUNT(*) AS n FROM jobs WHERE {_OPEN} AND id IN ({marks})", chunk
            ).fetchone()["n"]
        return n

    def drain(self, timeout: float | None = None, job_ids: list[str] | None = None) -> bool:
        """Run jobs in this thread (or wait for the worker running them) until none is owed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.pending(job_ids):
            if deadline is not None and time.monotonic() > deadline:
                return False
            if not self.run_ready(job_ids) and self.pending(job_ids):
                # Leased by another worker or backing off: wake when a job of this process ends.
                with self._finished:
                    self._finished.wait(min(self.backoff_seconds, 0.05))
        return True

    def dead_letters(self, tenant: str | None = None) -> list[dict[str, Any]]:
        only, params = _of_tenant(tenant)
        rows = self.db.read().execute(
            "SELECT id, body, attempts, last_error, created_at FROM jobs WHERE status = 'dead'"
            f"{only} ORDER BY created_at",
            params,
        )
        return [
            {"id": r["id"], "job": json.loads(r["body"]), "attempts": r["attempts"], "error": r["last_error"]}
            for r in rows
        ]

    def waiting(self, tenant: str) -> list[dict[str, Any]]:
        only, params = _of_tenant(tenant)
        rows = self.db.read().execute(
            f"SELECT id, body, status, attempts, last_error, created_at FROM jobs WHERE {_OPEN}{only} "
            "ORDER BY created_at LIMIT 1000",
            params,
        )
        return [
            {
                "id": r["id"],
                "job": json.loads(r["body"]),
                "status": r["status"],
                "attempts": r["attempts"],
                "error": r["last_error"],
                "created_at": r["created_at"],
            }
            for r in rows
        ]

    def redrive(self, tenant: str | None = None, job_ids: list[str] | None = None) -> int:
        only, params = _of_tenant(tenant)
        if job_ids is not None:
            if not job_ids:
                return 0
            only += f" AND id IN ({','.join('?' * len(job_ids))})"
            params = [*params, *job_ids]
        with self.db.write() as conn:
            bodies = conn.execute(
                "UPDATE jobs SET status = 'pending', attempts = 0, available_at = ? "
                f"WHERE status = 'dead'{only} RETURNING body",
                (self.clock(), *params),
            ).fetchall()
            if self.recorder is not None:
                self.recorder.queued([Job.model_validate_json(row["body"]) for row in bodies])
        self._wake.set()
        return len(bodies)

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Delete every job of the user, waiting, running or dead-lettered; returns how many."""
        with self.db.write() as conn:
            return int(
                conn.execute(
                    "DELETE FROM jobs WHERE user_key = ? OR (user_key IS NULL "
                    "AND json_extract(body, '$.tenant') = ? AND json_extract(body, '$.user_id') = ?)",
                    (_user_key(Job(type="extract", tenant=tenant, user_id=user_id)), tenant, user_id),
                ).rowcount
            )

    # -------------------------------------------------------------- processing
    def _claim(self, job_ids: list[str] | None = None) -> tuple[Job, int, str] | None:
        """Lease one ready job (among ``job_ids`` when given): (job, attempts so far, lease token)."""
        now = self.clock()
        only = ""
        params: list[Any] = [now]
        if job_ids is not None:
            if not job_ids:
                return None
            only = f" AND id IN ({','.join('?' * len(job_ids))})"
            params += job_ids
        with self.db.write() as conn:
            while True:
                # One job per user at a time, across threads and processes: two extractions of
                # one user at once could both decide to ADD the same fact.
                row = conn.execute(
                    f"SELECT id, body, attempts, status FROM jobs WHERE {_OPEN} AND available_at <= ?{only} "
                    "AND NOT EXISTS (SELECT 1 FROM jobs AS busy WHERE busy.user_key = jobs.user_key "
                    "AND busy.status = 'running' AND busy.available_at > ? AND busy.id != jobs.id) "
                    "ORDER BY available_at, created_at LIMIT 1",
                    [*params, now],
                ).fetchone()
                if row is None:
                    return None
                attempts = int(row["attempts"])
                if row["status"] == "running" and attempts >= self._attempts_of(row["body"]):
                    # Its workers kept dying (or timing out) with it: stop handing it out.
                    conn.execute(
                        "UPDATE jobs SET status = 'dead', lease_token = NULL, last_error = ? WHERE id = ?",
                        (f"the worker was lost {attempts} times while running it", row["id"]),
                    )
                    if self.recorder is not None:
                        lost = Job.model_validate_json(row["body"])
                        self.recorder.failed(lost, attempts, WORKER_LOST, final=True)
                    continue
                token = uuid.uuid4().hex
                conn.execute(
                    "UPDATE jobs SET status = 'running', lease_token = ?, attempts = attempts + 1, "
                    "available_at = ? WHERE id = ?",
                    (token, now + self.lease_seconds, row["id"]),
                )
                job = Job.model_validate_json(row["body"])
                if self.recorder is not None:
                    self.recorder.running(job, attempts + 1)
                return job, attempts + 1, token

    def _attempts_of(self, body: str) -> int:
        job_type = json.loads(body).get("type")
        return self.retries.get(job_type, (self.max_attempts, 0.0))[0]

    def _renew(self, job_id: str, token: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                "UPDATE jobs SET available_at = ? WHERE id = ? AND lease_token = ?",
                (self.clock() + self.lease_seconds, job_id, token),
            )

    def _finish(self, job: Job, attempts: int, token: str, error: Exception | None) -> None:
        most, backoff = self.retries.get(job.type, (self.max_attempts, self.backoff_seconds))
        dead = error is not None and attempts >= most
        with self.db.write() as conn:
            if error is None:
                ours = conn.execute("DELETE FROM jobs WHERE id = ? AND lease_token = ?", (job.id, token))
            else:  # a failed job is retried, then dead-lettered
                ours = conn.execute(
                    "UPDATE jobs SET status = ?, lease_token = NULL, available_at = ?, last_error = ? "
                    "WHERE id = ? AND lease_token = ?",
                    (
                        "dead" if dead else "pending",
                        self.clock() + backoff * (2 ** (attempts - 1)),
                        f"{type(error).__name__}: {error}"[:2000],
                        job.id,
                        token,
                    ),
                )
        # A worker whose lease ran out (another one took the job over) has nothing to report.
        if self.recorder is not None and ours.rowcount:
            if error is None:
                self.recorder.done(job, attempts)
            else:
                self.recorder.failed(job, attempts, error, final=dead)
        with self._finished:
            self._finished.notify_all()

    def run_ready(self, job_ids: list[str] | None = None) -> int:
        """Run every job that is ready now (among ``job_ids`` when given); returns how many ran."""
        if self._handler is None:
            raise RuntimeError("no job handler is set on the local queue")
        ran = 0
        while (claimed := self._claim(job_ids)) is not None:
            job, attempts, token = claimed
            ran += 1
            error: Exception | None = None
            with self._heartbeat.keep(functools.partial(self._renew, job.id, token)):
                try:
                    self._handler(job)
                except Exception as exc:
                    error = exc
            self._finish(job, attempts, token, error)
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


def _of_tenant(tenant: str | None) -> tuple[str, list[Any]]:
    """The SQL condition (and its parameter) keeping only ``tenant``'s jobs; nothing for ``None``."""
    if tenant is None:
        return "", []
    return " AND json_extract(body, '$.tenant') = ?", [tenant]


def _user_key(job: Job) -> str:
    return f"{job.tenant}\x1f{job.user_id}"


def build(settings: Settings, clients: Mapping[str, Any], db: Database | None) -> SqliteJobQueue:
    """``MEMSTACK_QUEUE_BACKEND=local``: jobs in the SQLite file (``factory.QUEUES``)."""
    assert db is not None, "the SQLite queue needs the data file open"
    hooks = settings.webhooks
    return SqliteJobQueue(
        db,
        max_attempts=settings.queue.queue_max_attempts,
        # A receiver that is down for a while must not dead-letter its events in seconds.
        retries={"webhook": (hooks.webhook_max_attempts, hooks.webhook_backoff_seconds)},
    )
