"""The local durable queue: retries with backoff, then the dead-letter list, then redrive."""

from __future__ import annotations

from pathlib import Path

from memstack.adapters.embedded.database import Database
from memstack.adapters.queue.sqlite import SqliteJobQueue
from memstack.ports.queue import Job


def test_a_failing_job_is_retried_then_dead_lettered_and_redrive_runs_it_again(tmp_path: Path) -> None:
    db = Database(tmp_path / "q.sqlite3")
    queue = SqliteJobQueue(db, max_attempts=3, backoff_seconds=0.0)
    calls: dict[str, int] = {}
    broken = {"bad"}

    def handler(job: Job) -> None:
        calls[job.id] = calls.get(job.id, 0) + 1
        if job.id in broken:
            raise ValueError("model unavailable")

    queue.set_handler(handler)
    queue.send(
        [
            Job(id="ok", type="extract", tenant="t", user_id="u"),
            Job(id="bad", type="extract", tenant="t", user_id="u"),
        ]
    )
    assert queue.drain(timeout=30)
    assert calls == {"ok": 1, "bad": 3}
    dead = queue.dead_letters()
    assert [(d["id"], d["attempts"]) for d in dead] == [("bad", 3)]
    assert dead[0]["error"] == "ValueError: model unavailable" and dead[0]["job"]["type"] == "extract"

    broken.clear()  # the cause is fixed
    assert queue.redrive() == 1
    assert queue.drain(timeout=30)
    assert calls["bad"] == 4 and queue.dead_letters() == []
    db.close()


def test_jobs_survive_a_restart_and_a_known_id_is_not_queued_twice(tmp_path: Path) -> None:
    db = Database(tmp_path / "q.sqlite3")
    SqliteJobQueue(db).send([Job(id="j1", type="consolidate", tenant="t", user_id="u")] * 2)
    db.close()
    db = Database(tmp_path / "q.sqlite3")
    queue = SqliteJobQueue(db)
    seen: list[str] = []
    queue.set_handler(lambda job: seen.append(job.id))
    assert queue.pending() == 1
    assert queue.drain(timeout=30)
    assert seen == ["j1"]
    db.close()


def test_a_tenant_sees_and_redrives_only_its_own_jobs(tmp_path: Path) -> None:
    db = Database(tmp_path / "q.sqlite3")
    queue = SqliteJobQueue(db, max_attempts=1, backoff_seconds=0.0)

    def broken(job: Job) -> None:
        raise ValueError(f"broken {job.id}")

    queue.set_handler(broken)
    queue.send(
        [Job(id=f"{t}-{n}", type="extract", tenant=t, user_id="u") for t in ("a", "b") for n in (1, 2)]
    )
    assert [j["id"] for j in queue.waiting("a")] == ["a-1", "a-2"]
    assert all(j["status"] == "pending" for j in queue.waiting("a"))
    assert queue.drain(timeout=30)
    assert queue.waiting("a") == [] and len(queue.dead_letters()) == 4
    assert [d["id"] for d in queue.dead_letters("b")] == ["b-1", "b-2"]
    # Only the named job of the caller's tenant moves; another tenant's id is left alone.
    assert queue.redrive("a", ["a-2", "b-1"]) == 1
    assert [j["id"] for j in queue.waiting("a")] == ["a-2"] and queue.waiting("b") == []
    assert queue.redrive("b") == 2
    assert sorted(j["id"] for j in queue.waiting("b")) == ["b-1", "b-2"]
    assert [d["id"] for d in queue.dead_letters()] == ["a-1"]
    db.close()
