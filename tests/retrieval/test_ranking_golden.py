"""Rankings, scores and explain output on a fixed corpus, against the recorded answers.

The file was recorded before the search path was rebuilt on columns (the pool's
records no longer loaded, issue 11) and must not move when only the cost of a
search changes. Scores may differ in the last float digits (cosines computed
as one matrix product instead of one dot product each); orders may not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from memstack.service import MemoryService

from tests.retrieval import ranking_corpus

REGENERATE = "python -m tests.retrieval.ranking_corpus"


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    service: MemoryService = ranking_corpus.build(Path(tmp_path_factory.mktemp("golden")))
    try:
        yield ranking_corpus.run(service)
    finally:
        service.close()


def _recorded() -> list[tuple[str, str, dict[str, Any]]]:
    lines = ranking_corpus.GOLDEN.read_text().splitlines()
    return [tuple(json.loads(line)) for line in lines]  # type: ignore[misc]


def _close(new: float, old: float) -> bool:
    return new == pytest.approx(old, rel=1e-6, abs=1e-7)


def test_every_recorded_search_is_still_asked() -> None:
    recorded = {(case, query) for case, query, _ in _recorded()}
    asked = {(name, q) for name, *_ in ranking_corpus._cases() for q in ranking_corpus.queries()}
    assert recorded == asked, f"the cases or queries changed: regenerate with {REGENERATE}"


@pytest.mark.parametrize("case", [name for name, *_ in ranking_corpus._cases()])
def test_rankings_and_scores_are_the_recorded_ones(case: str, answers: dict[str, Any]) -> None:
    mismatches = []
    for name, query, old in _recorded():
        if name != case:
            continue
        new = json.loads(json.dumps(answers[case][query]))
        keys_new, keys_old = [h[0] for h in new["hits"]], [h[0] for h in old["hits"]]
        if keys_new != keys_old:
            mismatches.append(f"{query!r}: order {keys_new} != recorded {keys_old}")
            continue
        if new["status"] != old["status"]:
            mismatches.append(f"{query!r}: status {new['status']} != recorded {old['status']}")
        for h_new, h_old in zip(new["hits"], old["hits"], strict=True):
            if not _close(h_new[1], h_old[1]) or h_new[2] != h_old[2]:
                mismatches.append(f"{query!r} {h_old[0]!r}: score/superseded {h_new[1:3]} != {h_old[1:3]}")
            if len(h_old) > 3:
                stages_new, stages_old = h_new[3], h_old[3]
                if set(stages_new) != set(stages_old) or not all(
                    _close(stages_new[k], v) for k, v in stages_old.items()
                ):
                    mismatches.append(f"{query!r} {h_old[0]!r}: stages {stages_new} != {stages_old}")
    assert not mismatches, (
        f"{len(mismatches)} searches differ from the recorded answers (if a change to retrieval "
        f"is meant to change them, regenerate with {REGENERATE}):\n" + "\n".join(mismatches[:5])
    )
