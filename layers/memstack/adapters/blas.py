"""How many threads numpy's BLAS may use in this process (``MEMSTACK_BLAS_THREADS``).

Every search multiplies a few small matrices (the coarse pass, the rescoring,
the near-duplicate check). OpenBLAS splits each product across all cores and
wakes its threads for it; on 2 cores already busy with other requests (or
other processes) that made a 10,000-row matrix-vector product 13 ms instead
of 0.14 ms on one thread, and a 100 x 100 Gram matrix 13 ms instead of
0.12 ms. A server gets its parallelism from concurrent requests, each on one
BLAS thread, and numpy releases the GIL while it multiplies.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_applied: int | None = None


def limit_blas_threads(threads: int) -> None:
    """Cap numpy's BLAS at ``threads`` threads for the whole process (0 leaves it alone)."""
    global _applied
    if threads <= 0:
        return
    with _lock:
        if _applied == threads:
            return
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=threads, user_api="blas")
        _applied = threads
