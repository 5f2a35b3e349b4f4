"""Erase is final: a write made for a user from before the user's erasure is refused.

A job that was already running when ``DELETE /v1/users/{id}`` ran (it read
the message, then asked the model) would otherwise write its memories after
the erase, and the user would have data again. Work declares when it began
(``with began(now):`` around a job, a consolidation, an add), and each store,
in the same transaction (or condition) as the write, refuses a write of work
that began before the user's last erasure: the job fails with ``Erased``, is
retried, and its retry finds nothing left to work on. Writes outside such
work (an import, a test) carry no start and are not fenced.

The erasure marker holds no user id: it is keyed by a hash of (tenant, user),
and it expires once no job from before the erase can still be running
(``Settings.job_idempotency_seconds``: SQS keeps a message at most that long).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime

from memstack.errors import Conflict

#: how long an erasure marker is kept (SQS's longest retention, 4 days)
RETENTION_SECONDS = 345_600


class Erased(Conflict):
    code = "user_erased"


def erasure_key(tenant: str, user_id: str) -> str:
    return hashlib.blake2b(f"{tenant}\x1f{user_id}".encode(), digest_size=16).hexdigest()


_began: ContextVar[float | None] = ContextVar("memstack_work_began", default=None)


@contextmanager
def began(when: datetime) -> Iterator[None]:
    """Every store write inside the block is of work that began at ``when``."""
    token = _began.set(when.timestamp())
    try:
        yield
    finally:
        _began.reset(token)


def work_began() -> float | None:
    """When the work now writing began (epoch seconds), or None outside declared work."""
    return _began.get()


def refuse_if_erased(erased_at: float | None) -> None:
    """``Erased`` when the work now writing began before the user's last erasure (at ``erased_at``)."""
    started = _began.get()
    if erased_at is not None and started is not None and started < erased_at:
        raise Erased(
            "the user was erased while this work was running; nothing of it is kept (retry to start anew)"
        )
