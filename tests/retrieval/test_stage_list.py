"""The pipeline is its list of stages: a stage added to the list runs in its place; explain keys are named."""

from __future__ import annotations

from memstack.domain.retrieval import columns
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.stage import Search
from memstack.domain.retrieval.stages import PIPELINE, STAGES
from memstack.domain.retrieval.types import SearchRequest
from memstack.service import MemoryService

from tests.retrieval.helpers import REF, T, U, put, record

#: the explain value the added stage writes, named in its own module (as a new stage's would be)
HALVED_FROM = "halved_from"


class HalveTheBest:
    """A stage of the kind a contributor adds: reads the pool stage 4 made, changes it, says what it did."""

    name = "halve_best"
    columns = (HALVED_FROM,)

    def run(self, search: Search) -> str:
        pool = search.pool
        best = pool.order[0]
        pool.put(HALVED_FROM, best, pool.score[best])
        pool.rescore(best, pool.score[best] / 2)
        pool.ranked(self.name)
        return f"ok: halved {pool.ids[best]}"


def test_the_stage_names_are_the_pipeline_in_order() -> None:
    assert tuple(stage.name for stage in PIPELINE) == STAGES
    assert STAGES[0] == "query_analysis" and STAGES[-1] == "history"


def test_a_stage_added_to_the_list_runs_in_its_place(service: MemoryService) -> None:
    put(
        service,
        record(service, "I adopted a greyhound called Pixel", "m1"),
        record(service, "Pixel the greyhound loves the beach", "m2"),
    )
    req = SearchRequest(tenant=T, user_id=U, query="greyhound Pixel", reference_time=REF)
    plain = Retriever(service.store, service.embedder, service.retriever.config).search(req)
    fusion = STAGES.index("fusion")
    stages = (*PIPELINE[: fusion + 1], HalveTheBest(), *PIPELINE[fusion + 1 :])
    result = Retriever(service.store, service.embedder, service.retriever.config, stages=stages).search(req)
    assert list(result.stage_status) == [*STAGES[: fusion + 1], "halve_best", *STAGES[fusion + 1 :]]
    assert result.stage_status["halve_best"].startswith("ok: halved")
    assert "halve_best" in result.stage_durations
    # The best of the plain search was halved and so fell below the second.
    assert [h.record.id for h in result.hits[:2]] == [h.record.id for h in plain.hits[:2]][::-1]
    assert result.hits[1].stages[columns.rank_after("halve_best")] == 2.0


def test_every_explain_value_has_a_named_column(service: MemoryService) -> None:
    put(service, record(service, "I adopted a greyhound called Pixel", "m1"))
    result = service.search(
        SearchRequest(tenant=T, user_id=U, query="greyhound", reference_time=REF, explain=True)
    )
    assert result.hits and set(result.hits[0].stages) <= columns.named(PIPELINE)


def test_an_added_stage_names_its_explain_values_in_its_own_module(service: MemoryService) -> None:
    put(service, record(service, "I adopted a greyhound called Pixel", "m1"))
    req = SearchRequest(tenant=T, user_id=U, query="greyhound", reference_time=REF, explain=True)
    fusion = STAGES.index("fusion")
    stages = (*PIPELINE[: fusion + 1], HalveTheBest(), *PIPELINE[fusion + 1 :])
    result = Retriever(service.store, service.embedder, service.retriever.config, stages=stages).search(req)
    shown = set(result.hits[0].stages)
    assert HALVED_FROM in shown and columns.rank_after("halve_best") in shown
    assert shown <= columns.named(stages) and not shown <= columns.named(PIPELINE)
