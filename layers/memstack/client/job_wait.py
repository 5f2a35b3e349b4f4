"""Waiting for jobs to finish: what both clients' ``wait_for_jobs`` share (they differ in how they sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from memstack.api.schemas import AddMemoriesResponse, JobStatusResponse

#: states a job does not leave by itself (a failed one leaves only when it is redriven)
FINISHED = frozenset({"done", "failed"})


class JobWait:
    """The jobs still to finish, their last states, and how long to sleep before asking again."""

    def __init__(
        self,
        jobs: AddMemoriesResponse | Sequence[str],
        timeout: float | None,
        poll: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        ids = (
            jobs.job_ids
            if isinstance(jobs, AddMemoriesResponse)
            else [jobs]
            if isinstance(jobs, str)
            else jobs
        )
        self.states: dict[str, JobStatusResponse | None] = dict.fromkeys(ids)
        self.clock = clock
        self.deadline = None if timeout is None else clock() + timeout
        self.poll = poll

    def unfinished(self) -> list[str]:
        return [i for i, s in self.states.items() if s is None or s.status not in FINISHED]

    def saw(self, state: JobStatusResponse) -> None:
        self.states[state.id] = state

    def results(self) -> list[JobStatusResponse]:
        """Every job's last state, in the order given."""
        return [s for s in self.states.values() if s is not None]

    def delay(self) -> float:
        """Seconds to sleep before the next round; ``TimeoutError`` once the deadline has passed."""
        if self.deadline is None:
            return self.poll
        left = self.deadline - self.clock()
        if left <= 0:
            waiting = ", ".join(
                f"{i} ({s.status if s else 'unknown'})"
                for i, s in self.states.items()
                if s is None or s.status not in FINISHED
            )
            raise TimeoutError(f"jobs not finished in time: {waiting}")
        return min(self.poll, left)
