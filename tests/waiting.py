"""Waiting on a condition, never on a fixed sleep: the machine running the tests is shared."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], deadline: float = 60.0, what: str = "condition") -> None:
    """Poll ``condition`` until it holds; fail after a generous ``deadline`` (seconds)."""
    end = time.monotonic() + deadline
    pause = threading.Event()
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"{what} did not happen within {deadline} s")
        pause.wait(0.01)
