"""Resource exhaustion (issue 25, items 3, 4 and 5): a full disk, idle and slow sockets, a long reader.

* A full data volume answers 507 with ``Retry-After``, stores nothing of the
  refused request (every add's STM entries and turns are one unit) and still
  erases a user. Injected (SQLite's ``max_page_count``: the very
  ``SQLITE_FULL`` a full disk raises) everywhere, and on a real 48 MiB tmpfs
  where this machine lets the test mount one.
* ``memstack serve`` on loopback, bounded in count and in time: idle
  connections from one address and from many, and a client sending its
  headers a byte at a time, never keep ``/v1/health`` from answering and are
  closed within the configured seconds.
* An erase while another connection holds a read snapshot answers at once,
  another user's add is not held up, and the scrub of the file still happens
  once the reader is gone.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.embedded.database import Database
from memstack.adapters.embedded.stm import EmbeddedShortTermStore
from memstack.adapters.embedded.store import EmbeddedMemoryStore
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.bench.server_process import ServerProcess
from memstack.factory import build_service
from memstack.settings import load_settings

from tests.api.conftest import build_api, rest_event
from tests.reliability.traces import file_bytes, table_counts
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------- a full disk
class FullDisk(Database):
    """A database whose file may not grow past ``limit`` pages: SQLite answers ``SQLITE_FULL``."""

    limit: int | None = None

    def connection(self) -> sqlite3.Connection:
        conn = super().connection()
        conn.execute(f"PRAGMA max_page_count = {self.limit or 1073741823}")
        return conn

    def fill(self) -> None:
        self.limit = int(self.connection().execute("PRAGMA page_count").fetchone()[0])

    def free(self) -> None:
        self.limit = None


def _turns(prefix: str, n: int, size: int = 600) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}-{i}", "role": "user", "content": f"{prefix} {i} " + "word " * size}
        for i in range(n)
    ]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[tuple[Any, Any, FullDisk]]:
    settings = load_settings(data_dir=tmp_path / "data", embedder="hashing", max_message_chars=20_000)
    db = FullDisk(settings.db_path)
    service = build_service(
        settings,
        store=EmbeddedMemoryStore(db),
        stm=EmbeddedShortTermStore(db),
        queue=SqliteJobQueue(db, max_attempts=settings.queue.queue_max_attempts),
    )
    yield build_api(service, settings), service, db
    service.close()
    db.close()


def _unit_holds(db: Database) -> None:
    """Every STM entry has its turn record and the other way round: no half-stored add."""
    conn = db.read()
    entries = conn.execute("SELECT count(*) FROM stm").fetchone()[0]
    turns = conn.execute("SELECT count(*) FROM memories WHERE tier = 'stm'").fetchone()[0]
    assert entries == turns, (entries, turns)


def test_a_full_disk_answers_507_with_retry_after_and_stores_nothing_of_the_request(full_disk) -> None:
    api, _, db = full_disk
    assert api("POST", "/v1/memories", body={"user_id": "ann", "messages": _turns("kept", 2)})[0] == 202
    db.fill()
    before = table_counts(db.path)
    refused = 0
    for n in range(6):
        status, answer = api("POST", "/v1/memories", body={"user_id": "bob", "messages": _turns(f"r{n}", 50)})
        assert status == 507, answer
        assert answer["error"]["code"] == "storage_full"
        refused += 1
    assert refused == 6
    assert table_counts(db.path) == before
    _unit_holds(db)
    # The answer says when to come back, and the client retries it as it does 503.
    result = api.app.resolve(
        __import__("tests.api.conftest", fromlist=["rest_event"]).rest_event(
            "POST", "/v1/memories", body={"user_id": "bob", "messages": _turns("again", 50)}
        ),
        None,
    )
    assert result["statusCode"] == 507 and result["multiValueHeaders"]["Retry-After"] == ["30"]
    from memstack.client.retry import ALWAYS_RETRIED

    assert 507 in ALWAYS_RETRIED
    # Consolidation answers 507 too (never 500), and a user can still be erased on the full disk.
    assert api("POST", "/v1/consolidations", body={"user_id": "ann", "sync": True})[0] in (200, 507)
    status, answer = api("DELETE", "/v1/users/ann")
    assert status == 200 and answer["erased"]["stm"] == 2, answer
    # Once space is freed the same request goes through, whole, without a restart.
    db.free()
    status, answer = api("POST", "/v1/memories", body={"user_id": "bob", "messages": _turns("r0", 50)})
    assert status == 202 and len(answer["stored"]) == 50, answer
    _unit_holds(db)


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {where} && echo mounted"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "mounted" in probe.stdout


def test_a_real_full_volume_refuses_adds_with_507_and_still_erases(tmp_path: Path) -> None:
    """On a real 48 MiB tmpfs (a private mount namespace): the disk fills, the erase uses the reserve."""
    volume = tmp_path / "volume"
    volume.mkdir()
    if not _can_mount_tmpfs(volume):
        pytest.skip("this machine does not let the test mount a tmpfs (the injected SQLITE_FULL test runs)")
    run = f"{sys.executable} -m tests.reliability.full_volume {volume}"
    script = f"mount -t tmpfs -o size=48m tmpfs {volume} && exec {run}"
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c", script], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "full volume: ok" in done.stdout, done.stdout[-3000:]


# ------------------------------------------------------------------- idle and slow sockets
LIMITS = {
    "MEMSTACK_SERVER_CONNECTION_LIMIT": "40",
    "MEMSTACK_SERVER_CONNECTIONS_PER_CLIENT": "8",
    "MEMSTACK_SERVER_IDLE_TIMEOUT_SECONDS": "2",
    "MEMSTACK_SERVER_REQUEST_TIMEOUT_SECONDS": "3",
}


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    env = {**LIMITS, "MEMSTACK_STORAGE_RESERVE_BYTES": "0"}
    with ServerProcess(tmp_path_factory.mktemp("serve") / "data", threads=2, env=env) as server:
        yield server


def _health(port: int) -> int:
    conn = HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/v1/health")
        return conn.getresponse().status
    finally:
        conn.close()


@contextmanager
def idle(port: int, *sources: tuple[str, int]) -> Iterator[list[socket.socket]]:
    """``n`` connections from each ``(source, n)`` (addresses of 127/8) that send nothing; closed after."""
    out: list[socket.socket] = []
    try:
        for source, n in sources:
            for _ in range(n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                out.append(s)
                s.settimeout(30)
                s.bind((source, 0))
                s.connect(("127.0.0.1", port))
        yield out
    finally:
        for s in out:
            s.close()


def _closed_by_server(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset: closed too
        return True


def test_idle_connections_from_one_client_are_capped_and_health_answers(guarded: ServerProcess) -> None:
    with idle(guarded.port, ("127.0.0.2", 120)) as flood:  # more than waitress's default limit of 100
        assert _health(guarded.port) == 200
        # All but the client's 8 are closed at once; the 8 within the idle timeout.
        wait_until(lambda: sum(not _closed_by_server(s) for s in flood) <= 8, what="the per-client cap")
        assert _health(guarded.port) == 200
        wait_until(lambda: all(_closed_by_server(s) for s in flood), what="the idle timeout")


def test_idle_connections_from_many_clients_cannot_fill_the_server(guarded: ServerProcess) -> None:
    sources = [(f"127.0.0.{i}", 6) for i in range(3, 13)]  # 60 connections: over the limit of 40
    with idle(guarded.port, *sources) as flood:
        # A new connection evicts the quietest waiting one: health still gets in.
        for _ in range(5):
            assert _health(guarded.port) == 200
        wait_until(lambda: all(_closed_by_server(s) for s in flood), what="the idle timeout")


def test_a_slowloris_client_is_cut_off_within_the_request_timeout(guarded: ServerProcess) -> None:
    """Headers a byte at a time (each byte resets an idle timer): closed by the request timeout."""
    request = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 400
    pause = threading.Event()
    with idle(guarded.port, ("127.0.0.20", 4)) as slow:
        cut_off = [False] * len(slow)
        for byte in range(len(request)):  # at most ~400 drips of 0.1 s: the test's own bound
            for i, s in enumerate(slow):
                if cut_off[i]:
                    continue
                try:
                    s.send(request[byte : byte + 1])
                except OSError:
                    cut_off[i] = True
                if _closed_by_server(s):
                    cut_off[i] = True
                s.setblocking(True)
            if all(cut_off):
                break
            assert _health(guarded.port) == 200
            pause.wait(0.1)
        assert all(cut_off), "a client trickling its headers kept its connection"


# ------------------------------------------------------------- an erase racing a long reader
WORDS = ["quixoticzebra", "marzipanvault"]


def test_an_erase_does_not_wait_for_a_long_reader_nor_hold_other_users(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", embedder="hashing")
    service = build_service(settings)
    api = build_api(service, settings)
    body = {"user_id": "ann", "messages": [{"role": "user", "content": f"I keep {w}."} for w in WORDS]}
    assert api("POST", "/v1/memories", body=body)[0] == 202
    assert service.queue.drain(timeout=120)
    # Another process's long read: a snapshot held open on its own connection.
    reader = sqlite3.connect(settings.db_path, timeout=30)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memories").fetchone()
    done: dict[str, Any] = {}

    def erase() -> None:
        done["erase"] = api("DELETE", "/v1/users/ann")

    def bystander() -> None:
        add = {"user_id": "bob", "messages": [{"role": "user", "content": "I live in Riga."}]}
        done["add"] = api("POST", "/v1/memories", body=add)

    try:
        threading.Thread(target=erase, daemon=True).start()
        wait_until(lambda: "erase" in done, deadline=20, what="the erase while a reader holds a snapshot")
        assert done["erase"][0] == 200
        threading.Thread(target=bystander, daemon=True).start()
        wait_until(lambda: "add" in done, deadline=20, what="another user's add during the erase's scrub")
        assert done["add"][0] == 202
        store = service.store
        assert store.scrubber.owed(), "the reader is still there: the scrub cannot have happened yet"
        # What the erase deleted is gone from every table at once, whatever the reader holds.
        conn = sqlite3.connect(settings.db_path)
        assert conn.execute("SELECT count(*) FROM memories WHERE user_id = 'ann'").fetchone()[0] == 0
        conn.close()
    finally:
        reader.rollback()
        reader.close()
    # The reader is gone: the owed scrub runs by itself, and the words leave the file's bytes.
    wait_until(lambda: not service.store.scrubber.owed(), what="the deferred scrub")
    raw = file_bytes(settings.data_dir)
    assert not [w for w in WORDS if w.encode() in raw]
    service.close()


def test_an_owed_scrub_is_finished_by_the_next_process(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data", embedder="hashing")
    service = build_service(settings)
    api = build_api(service, settings)
    body = {"user_id": "ann", "messages": [{"role": "user", "content": f"I keep {w}."} for w in WORDS]}
    assert api("POST", "/v1/memories", body=body)[0] == 202
    reader = sqlite3.connect(settings.db_path, timeout=30)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM memories").fetchone()
    assert api("DELETE", "/v1/users/ann")[0] == 200
    service.close()  # this process stops before the reader is done: the scrub is still owed
    reader.rollback()
    reader.close()
    again = build_service(settings)
    wait_until(lambda: not again.store.scrubber.owed(), what="the scrub finished by the next process")
    raw = file_bytes(settings.data_dir)
    assert not [w for w in WORDS if w.encode() in raw]
    again.close()


# ------------------------------------------------------------------ contention between processes
def _real_busy_error(tmp_path: Path) -> sqlite3.OperationalError:
    """The error SQLite raises when another process holds the file past the busy timeout."""
    path = tmp_path / "contended.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        assert exc.sqlite_errorcode == sqlite3.SQLITE_BUSY
        return exc
    finally:
        other.close()
        holder.close()
    raise AssertionError("no SQLITE_BUSY")


@pytest.mark.parametrize(
    "method, path, fault, kwargs",
    [
        ("GET", "/v1/memories", "list", {"query": {"user_id": "alice"}}),
        ("POST", "/v1/memories/search", "read_view", {"body": {"user_id": "alice", "query": "chess"}}),
        (
            "POST",
            "/v1/memories",
            "put",
            {"body": {"user_id": "alice", "messages": [{"role": "user", "content": "x"}]}},
        ),
    ],
)
def test_sqlite_contention_is_503_with_retry_after_not_500(
    faulty_service: Any, tmp_path: Path, method: str, path: str, fault: str, kwargs: dict[str, Any]
) -> None:
    """Two ``memstack serve --workers`` processes (or the CLI beside the server) share the file:
    a busy file is an outage of a moment (503 + Retry-After, nothing stored), never a 500."""
    from tests.reliability.faults import Fail

    service = faulty_service(store_faults={fault: Fail(_real_busy_error(tmp_path))})
    api = build_api(service, service.settings)
    before = table_counts(service.settings.db_path)
    result = api.app.resolve(rest_event(method, path, **kwargs), None)
    answer = json.loads(result["body"])
    assert result["statusCode"] == 503 and answer["error"]["code"] == "dependency_failed", answer
    assert "busy" in answer["error"]["message"]
    headers = {k.lower(): v for k, v in (result.get("multiValueHeaders") or {}).items()}
    assert headers.get("retry-after") == ["1"], result
    assert table_counts(service.settings.db_path) == before
