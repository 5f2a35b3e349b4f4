"""The fault-injection suite: every port call of a workload fails once, and the system still converges.

For each port method the workload calls (store, STM, queue, embedder,
extractor, summariser, reranker) and for its first and its last call, two
faults: an outage (``DependencyFailed`` before the call, as an adapter raises
after its own retries of throttling, 5xx and timeouts) and a crash right
after the call took effect (the process dies: after the STM write and before
the enqueue, mid-extraction, mid-consolidation). Each run must then show:
no accepted message lost, no duplicate memory, a 503 (or 409 for a busy
consolidation) as the only refusals, and exactly the state a run without
faults ends in. AWS adapters under the same faults: ``test_aws_faults.py``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from memstack.errors import DependencyFailed

from tests.reliability.faults import Crash, Fail
from tests.reliability.workload import (
    Scenario,
    check_invariants,
    fault_for,
    make_rig,
    reference_calls,
    run_workload,
    scenarios,
)

with tempfile.TemporaryDirectory() as _tmp:
    REFERENCE, CALLS = reference_calls(Path(_tmp))
SCENARIOS = list(scenarios(CALLS))


def test_the_matrix_covers_the_steps_named_in_the_issue() -> None:
    ids = {s.id for s in SCENARIOS}
    assert "stm.append#1-crash" in ids  # after the STM write, before the enqueue
    assert "queue.send#1-outage" in ids  # the enqueue itself
    assert "extractor.extract#1-crash" in ids  # mid-extraction
    assert "summariser.summarise#1-crash" in ids and "store.mark#1-crash" in ids  # mid-consolidation
    assert {s.port for s in SCENARIOS} == {
        "store",
        "stm",
        "queue",
        "embedder",
        "extractor",
        "summariser",
        "reranker",
    }
    assert len(SCENARIOS) >= 60


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_one_fault_at_one_port_call(scenario: Scenario, tmp_path: Path) -> None:
    rig = make_rig(tmp_path / "data", fault_for(scenario))
    try:
        outcome = run_workload(rig)
        assert rig.ports[scenario.port].injected[scenario.method] == 1, "the fault never struck"
        check_invariants(rig, outcome, REFERENCE)
        if scenario.kind == "crash":
            assert outcome.crashes >= 1
    finally:
        rig.close()


COMPOUND: dict[str, dict[str, dict[str, Any]]] = {
    # The retry of an add whose server died after the STM write finds the outbox unreadable once.
    "crash after the STM write, then the outbox lookup fails": {
        "stm": {
            "append": Fail(Crash(), after=True),
            "unextracted": Fail(DependencyFailed("STM is down")),
        }
    },
    "the queue refuses three sends in a row": {"queue": {"send": Fail(DependencyFailed("SQS"), times=3)}},
    # More failures than the queue's attempts: the job dead-letters and a redrive finishes it.
    "the model is down past every retry": {
        "extractor": {"extract": Fail(DependencyFailed("Bedrock is down"), times=5)}
    },
    "the index fails every other write": {
        "store": {"put": [Fail(DependencyFailed("index"), on_call=n) for n in range(1, 14, 2)]}
    },
    "crash mid-consolidation after its summary was written": {
        "store": {"put": Fail(Crash(), after=True, on_call=CALLS["store"]["put"] - 1)}
    },
}


@pytest.mark.parametrize("name", sorted(COMPOUND))
def test_compound_faults(name: str, tmp_path: Path) -> None:
    rig = make_rig(tmp_path / "data", COMPOUND[name])
    try:
        outcome = run_workload(rig)
        check_invariants(rig, outcome, REFERENCE)
        if "past every retry" in name:
            assert outcome.redriven >= 1
    finally:
        rig.close()
