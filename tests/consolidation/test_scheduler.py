"""The scheduler picks only users over the threshold (or with old entries) and fans out one job each."""

from __future__ import annotations

from datetime import timedelta

from memstack.domain.consolidation.scheduler import due_users, job_id, start_consolidation_timer
from memstack.models import Message
from memstack.ports.stm import StmEntry
from memstack.service import MemoryService

from tests.consolidation.conftest import NOW, START, TURNS, conversation
from tests.waiting import wait_until

T = "acme"


def _seed(svc: MemoryService) -> None:
    svc.add(T, "busy", conversation("b", turns=TURNS[:12]), infer=False)  # over the threshold (10)
    svc.add(T, "quiet", conversation("q", turns=TURNS[:3]), infer=False)  # under it, and recent
    # Under the threshold, but the oldest turn has waited longer than consolidation_max_age_hours (24).
    old = START - timedelta(hours=30)
    svc.stm.append(
        [
            StmEntry(
                tenant=T,
                user_id="patient",
                message=Message(id=f"p{i}", content=TURNS[i], timestamp=old),
                received_at=old,
                expires_at=int((NOW + timedelta(days=5)).timestamp()),
            )
            for i in range(2)
        ]
    )


def test_only_users_over_the_threshold_or_too_old_are_due(csvc: MemoryService) -> None:
    _seed(csvc)
    due = due_users(csvc.stm, NOW, threshold=10, max_age=timedelta(hours=24))
    assert [(d.user_id, d.reason, d.pending) for d in due] == [
        ("busy", "threshold", 12),
        ("patient", "age", 2),
    ]


def test_schedule_fans_out_one_job_per_due_user_and_the_jobs_consolidate(csvc: MemoryService) -> None:
    _seed(csvc)
    result = csvc.schedule_consolidation(now=NOW)
    assert result["jobs"] == 2
    assert {u["user_id"] for u in result["users"]} == {"busy", "patient"}
    # The same schedule firing twice in one slot enqueues nothing new (deterministic job ids).
    csvc.schedule_consolidation(now=NOW)
    assert csvc.queue is not None and csvc.queue.pending() == 2  # type: ignore[attr-defined]
    assert csvc.queue.drain(timeout=30)
    assert csvc.stm.unconsolidated(T, "busy", NOW) == []
    assert csvc.stm.unconsolidated(T, "patient", NOW) == []
    assert len(csvc.stm.unconsolidated(T, "quiet", NOW)) == 3  # left alone


def test_schedule_purges_expired_stm_first(csvc: MemoryService) -> None:
    gone = NOW - timedelta(days=40)
    csvc.stm.append(
        [
            StmEntry(
                tenant=T,
                user_id="u",
                message=Message(id=f"e{i}", content="old news"),
                received_at=gone,
                expires_at=int((gone + timedelta(days=30)).timestamp()),
            )
            for i in range(11)
        ]
    )
    result = csvc.schedule_consolidation(now=NOW)
    assert result["purged_expired"] == 11 and result["jobs"] == 0
    assert csvc.stm.get(T, "u", "e0") is None


def test_job_ids_are_stable_within_a_slot_and_differ_between_users_and_slots() -> None:
    slot = timedelta(hours=1)
    start = NOW.replace(minute=0, second=0)
    assert job_id(T, "a", start, slot) == job_id(T, "a", start + timedelta(minutes=59), slot)
    assert job_id(T, "a", start, slot) != job_id(T, "a", start + timedelta(minutes=61), slot)
    assert job_id(T, "a", start, slot) != job_id(T, "b", start, slot)


def test_the_timer_runs_the_scheduler_until_stopped(csvc: MemoryService) -> None:
    csvc.add(T, "busy", conversation("b", turns=TURNS[:12]), infer=False)
    assert csvc.queue is not None
    csvc.queue.start_worker(poll_seconds=0.05)  # type: ignore[attr-defined]
    timer = start_consolidation_timer(csvc, interval_seconds=0.05)
    try:
        wait_until(lambda: not csvc.stm.unconsolidated(T, "busy", NOW), what="the timer's consolidation")
    finally:
        timer.stop()
        csvc.queue.stop_worker()  # type: ignore[attr-defined]
    assert timer.runs >= 1
    assert csvc.stm.unconsolidated(T, "busy", NOW) == []


def test_housekeeping_failure_does_not_stop_scheduling(csvc: MemoryService) -> None:
    _seed(csvc)

    def denied(now: object) -> int:
        raise PermissionError("AccessDenied: dynamodb:BatchWriteItem")

    csvc.stm.purge_expired = denied  # type: ignore[method-assign]
    result = csvc.schedule_consolidation(now=NOW)
    assert result["purged_expired"] is None and result["jobs"] == 2
