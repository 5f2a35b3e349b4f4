"""Ingest with extraction embeds each text once: a memo, one call per job, the turn's vector reused."""

from __future__ import annotations

import numpy as np
import pytest
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.domain.embedding_memo import EmbeddingMemo, memoised
from memstack.domain.erasure import Erased
from memstack.domain.extraction.apply import apply_operations
from memstack.factory import build_service
from memstack.models import Message, Scope
from memstack.ports.llm import ExtractionOp
from memstack.ports.queue import Job
from memstack.settings import Settings

T, U = "t1", "u1"


class Recording:
    """An embedder that records every call it gets (the texts of each)."""

    def __init__(self, dim: int = 64) -> None:
        self.inner = HashingEmbedder(dim)
        self.dim, self.name = self.inner.dim, self.inner.name
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


def test_the_memo_embeds_each_distinct_text_once_and_returns_the_models_vectors() -> None:
    model = Recording()
    memo = EmbeddingMemo(model, size=10)
    first = memo.embed(["a cat", "a dog", "a cat"])
    assert model.calls == [["a cat", "a dog"]]  # deduplicated within the call
    again = memo.embed(["a dog", "a bird"])
    assert model.calls[-1] == ["a bird"]  # only the text it had not seen
    np.testing.assert_array_equal(first, model.inner.embed(["a cat", "a dog", "a cat"]))
    np.testing.assert_array_equal(again, model.inner.embed(["a dog", "a bird"]))
    assert (memo.hits, memo.misses) == (2, 3)
    again[0] += 1.0  # a caller's array is its own: the memo's vector is unchanged
    np.testing.assert_array_equal(memo.embed(["a dog"])[0], model.inner.embed(["a dog"])[0])


def test_the_memo_forgets_the_least_recently_used_text_first() -> None:
    model = Recording()
    memo = EmbeddingMemo(model, size=2)
    memo.embed(["one", "two"])
    memo.embed(["one"])  # "one" is now the most recent
    memo.embed(["three"])  # evicts "two"
    model.calls.clear()
    memo.embed(["one", "two", "three"])
    assert model.calls == [["two"]]


def test_memoised_wraps_once_and_size_zero_means_none() -> None:
    model = Recording()
    assert memoised(model, 0) is model
    memo = memoised(model, 5)
    assert isinstance(memo, EmbeddingMemo) and memoised(memo, 5) is memo
    with pytest.raises(ValueError):
        EmbeddingMemo(model, 0)


def test_a_jobs_memory_texts_are_embedded_in_one_call(settings: Settings) -> None:
    model = Recording(settings.embedding.embedding_dim)
    service = build_service(settings, embedder=model)
    try:
        ops = [
            ExtractionOp(op="ADD", content=text, source_ids=["m1"])
            for text in ("Maya lives in Osaka.", "Maya is vegetarian.", "Maya is vegetarian.")
        ]
        written = apply_operations(
            service.store, service.embedder, 128, T, U, ops, session_id=None, scope=Scope.USER
        )
    finally:
        service.close()
    assert [r.content for r in written] == ["Maya lives in Osaka.", "Maya is vegetarian."]
    assert model.calls == [["Maya lives in Osaka.", "Maya is vegetarian."]]


def _extract(settings: Settings, content: str) -> Recording:
    model = Recording(settings.embedding.embedding_dim)
    service = build_service(settings, embedder=model)
    try:
        msg = Message(id="m1", speaker="Maya", content=content, timestamp="2026-03-02T10:00:00Z")  # type: ignore[arg-type]
        service.add(T, U, [msg], infer=True, sync=True)
    finally:
        service.close()
    return model


def test_the_neighbour_query_is_the_turns_stored_vector(settings: Settings) -> None:
    model = _extract(settings, "I moved to Osaka and I love the food there.")
    turn = "Maya: I moved to Osaka and I love the food there."
    assert model.texts.count(turn) == 1  # at ingest; the extraction job reads the stored vector


def test_a_turn_whose_dates_were_rewritten_is_embedded_again_for_its_neighbours(settings: Settings) -> None:
    model = _extract(settings, "I moved to Osaka yesterday.")
    queried = [t for t in model.texts if t.startswith("Maya: I moved to Osaka")]
    assert queried[0] == "Maya: I moved to Osaka yesterday." and len(queried) == 2
    assert queried[1] != queried[0]  # the job's query names the date the turn means


def test_turns_embedded_with_context_are_not_reused_as_the_query(settings: Settings) -> None:
    with_context = settings.model_copy(
        update={
            "ingest": settings.ingest.model_copy(
                update={
                    "indexing": settings.ingest.indexing.model_copy(update={"context_in_embedding": True})
                }
            )
        }
    )
    model = _extract(with_context, "I moved to Osaka and I love the food there.")
    assert model.texts.count("Maya: I moved to Osaka and I love the food there.") == 2


def test_erasing_a_user_empties_the_memo(settings: Settings) -> None:
    model = Recording(settings.embedding.embedding_dim)
    memo = EmbeddingMemo(model, size=100)
    service = build_service(settings, embedder=memo)
    try:
        msg = Message(id="m1", speaker="Maya", content="I moved to Osaka.", timestamp="2026-03-02T10:00:00Z")  # type: ignore[arg-type]
        service.add(T, U, [msg], infer=True, sync=True)
        assert memo.held > 0
        service.erase_user(T, U)
        assert memo.held == 0  # the user's texts are not kept, even in memory
        model.calls.clear()
        memo.embed(["Maya: I moved to Osaka."])
        assert model.calls == [["Maya: I moved to Osaka."]]  # embedded again, not remembered
    finally:
        service.close()


def test_a_job_an_erase_stopped_empties_the_memo(settings: Settings) -> None:
    memo = EmbeddingMemo(Recording(settings.embedding.embedding_dim), size=100)
    service = build_service(settings, embedder=memo)

    def embeds_then_is_fenced(job: Job) -> None:
        service.embedder.embed(["Maya: I moved to Osaka."])  # the job read the turn before the erase
        raise Erased("the user was erased while this job ran")

    service.job_handlers["extract"] = embeds_then_is_fenced
    try:
        with pytest.raises(Erased):
            service.process_job(Job(id="j1", type="extract", tenant=T, user_id=U))
        assert memo.held == 0
    finally:
        service.close()
