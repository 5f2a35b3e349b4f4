"""Percentiles and the facts about the machine a benchmark report carries."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from typing import Any

import numpy as np


def percentiles(values_ms: Sequence[float]) -> dict[str, float]:
    """p50, p95 and p99 (linear interpolation) of a list of milliseconds, rounded to 0.01 ms."""
    if not values_ms:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan")}
    p50, p95, p99 = np.percentile(np.asarray(values_ms, dtype=np.float64), [50, 95, 99])
    return {"p50": round(float(p50), 3), "p95": round(float(p95), 3), "p99": round(float(p99), 3)}


def median(values: Sequence[float]) -> float:
    return round(float(np.median(values)), 3) if values else float("nan")


def rss_mb() -> float:
    """This process's resident memory now (Linux ``/proc``; the peak elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return round(pages * os.sysconf("SC_PAGE_SIZE") / 1e6, 1)
    except (OSError, ValueError, IndexError):
        import resource

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3, 1)


def machine() -> dict[str, Any]:
    """Cores, load and Python: what a reader needs to weigh the absolute figures."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = []
    return {
        "cpus": os.cpu_count(),
        "load_average": load,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }
