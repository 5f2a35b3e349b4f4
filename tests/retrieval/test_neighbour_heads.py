"""A neighbour turn never ranks above the hit it was found through (``neighbours.below_their_heads``)."""

from __future__ import annotations

import numpy as np
from memstack.domain.retrieval.stages.neighbours import below_their_heads
from memstack.domain.retrieval.types import SearchRequest
from memstack.factory import build_service
from memstack.models import Message
from memstack.settings import Settings


def test_a_neighbour_that_rose_above_its_head_is_kept_just_below_it() -> None:
    ids = ["head", "memory", "neighbour", "other"]
    unit = np.array([0, 0, 1, 2])  # the head turn and its memory are one unit
    fused = np.array([0.5, 0.6, 0.1])  # per unit: the head's unit 0.5
    value = np.array([0.4, 0.5, 0.6, 0.1])
    out = below_their_heads(ids, unit, fused, value, {"neighbour": ["head"], "other": ["head"]})
    assert out[2] < 0.5 and out[2] > 0.4999  # under its head's unit, above everything below it
    assert out[3] == 0.1  # below its head already: unchanged
    assert list(value) == [0.4, 0.5, 0.6, 0.1]  # the input is left as it was
    # a neighbour whose head is not pooled keeps its value
    assert below_their_heads(ids, unit, fused, value, {"neighbour": ["gone"]})[2] == 0.6


def test_a_small_store_answers_with_the_matching_turn_not_its_neighbour(settings: Settings) -> None:
    # Three turns of one add, each in every ranking: the neighbour bonus alone put the last first.
    service = build_service(settings)
    try:
        texts = ["I adopted a cat named Miso.", "My favourite food is ramen.", "I work as a nurse in Lisbon."]
        service.add("t1", "alice", [Message(content=t) for t in texts], infer=False)
        result = service.search(SearchRequest(tenant="t1", user_id="alice", query="what is my cat called"))
        assert "neighbour turns: 1 candidates" in result.stage_status["bm25"]
        assert result.hits[0].record.content == texts[0]
    finally:
        service.close()
