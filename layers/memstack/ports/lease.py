"""The lease port: per-user mutual exclusion with expiry (one consolidation of a user at a time).

A lease is held by an ``owner`` (a random id per run) until it expires; its
holder renews it while the work lasts. A holder that dies stops renewing, so
its lease runs out and the next run may take it: a crash never blocks a
user for longer than one lease.
"""

from __future__ import annotations

from typing import Protocol


class Leases(Protocol):
    def acquire(self, tenant: str, user_id: str, name: str, owner: str, seconds: float) -> bool:
        """Take the lease unless another owner holds it unexpired; True when ``owner`` now holds it."""
        ...

    def renew(self, tenant: str, user_id: str, name: str, owner: str, seconds: float) -> bool:
        """Extend a lease ``owner`` holds; False when it no longer does (it expired and was taken)."""
        ...

    def release(self, tenant: str, user_id: str, name: str, owner: str) -> None:
        """Give the lease up (a no-op when ``owner`` does not hold it)."""
        ...

    def erase_user(self, tenant: str, user_id: str) -> int:
        """Drop every lease of the user (an erase leaves no row naming them); returns how many."""
        ...
