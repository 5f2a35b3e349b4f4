"""Bedrock embedders and reranker on botocore Stubber: every call shape, throttling, bad answers."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from memstack.adapters.embedders.bedrock import CohereEmbedder, TitanEmbedder
from memstack.adapters.rerankers.bedrock import BedrockReranker
from memstack.api.errors import http_status
from memstack.errors import DependencyFailed, SettingsError
from memstack.factory import build_embedder, build_reranker
from memstack.settings import load_settings

RERANK_ARN = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"


def body(payload: Any) -> StreamingBody:
    raw = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


@pytest.fixture
def runtime() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


@pytest.fixture
def agent() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("bedrock-agent-runtime", region_name="us-west-2")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def invoke_params(model: str, request: dict[str, Any]) -> dict[str, Any]:
    return {
        "modelId": model,
        "body": json.dumps(request),
        "contentType": "application/json",
        "accept": "application/json",
    }


def invoke_answer(payload: Any) -> dict[str, Any]:
    return {"body": body(payload), "contentType": "application/json"}


# -------------------------------------------------------------------------- Titan
def test_titan_sends_dimensions_and_normalize_and_returns_unit_rows(runtime: tuple[Any, Stubber]) -> None:
    client, stubber = runtime
    vec = [3.0] + [0.0] * 255
    request = {"inputText": "Alex moved to Lisbon", "dimensions": 256, "normalize": True}
    stubber.add_response(
        "invoke_model",
        invoke_answer({"embedding": vec, "inputTextTokenCount": 6, "embeddingsByType": {"float": vec}}),
        invoke_params("amazon.titan-embed-text-v2:0", request),
    )
    out = TitanEmbedder(256, client=client).embed(["Alex moved to Lisbon"])
    assert out.shape == (1, 256) and out.dtype == np.float32
    assert out[0, 0] == pytest.approx(1.0)


def test_titan_embeds_a_batch_one_call_per_text_in_order(runtime: tuple[Any, Stubber]) -> None:
    client, stubber = runtime
    texts = ["first", "second", "third"]
    for i, text in enumerate(texts):
        vec = [0.0] * 256
        vec[i] = 1.0
        stubber.add_response(
            "invoke_model",
            invoke_answer({"embedding": vec, "inputTextTokenCount": 1}),
            invoke_params(
                "amazon.titan-embed-text-v2:0", {"inputText": text, "dimensions": 256, "normalize": True}
            ),
        )
    # concurrency=1: the Stubber answers in order, so the calls must be sequential here.
    out = TitanEmbedder(256, client=client, concurrency=1).embed(texts)
    assert [int(np.argmax(row)) for row in out] == [0, 1, 2]


def test_titan_blank_texts_get_zero_vectors_without_a_call(runtime: tuple[Any, Stubber]) -> None:
    client, _ = runtime
    out = TitanEmbedder(512, client=client).embed(["  "])
    assert out.shape == (1, 512) and not out.any()


def test_titan_refuses_a_dimension_it_cannot_produce() -> None:
    with pytest.raises(SettingsError, match="MEMSTACK_EMBEDDING_DIM"):
        TitanEmbedder(384)


def test_titan_throttling_becomes_a_dependency_failure(runtime: tuple[Any, Stubber]) -> None:
    client, stubber = runtime
    stubber.add_client_error(
        "invoke_model",
        service_error_code="ThrottlingException",
        service_message="Too many requests",
        http_status_code=429,
    )
    with pytest.raises(DependencyFailed, match="throttled") as info:
        TitanEmbedder(256, client=client).embed(["hello"])
    assert http_status(info.value) == 503


@pytest.mark.parametrize(
    "payload",
    [
        "not json at all",
        {"message": "no embedding here"},
        {"embedding": [1.0, 2.0]},  # wrong dimension
        {"embedding": ["a"] * 256},
        {"embedding": [float("nan")] * 256},
        [1, 2, 3],
    ],
    ids=["not-json", "no-embedding", "wrong-dim", "non-numeric", "nan", "not-an-object"],
)
def test_titan_malformed_answers_raise_a_clear_error(runtime: tuple[Any, Stubber], payload: Any) -> None:
    client, stubber = runtime
    if isinstance(payload, list):
        payload = json.dumps(payload)
    stubber.add_response("invoke_model", invoke_answer(payload), ANY_INVOKE)
    with pytest.raises(DependencyFailed, match=r"amazon\.titan-embed-text-v2:0"):
        TitanEmbedder(256, client=client).embed(["hello"])


ANY_INVOKE = {"modelId": ANY, "body": ANY, "contentType": ANY, "accept": ANY}


def test_titan_warns_that_its_prefix_is_not_matryoshka(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        TitanEmbedder(1024, coarse_dim=256)
    assert "MEMSTACK_COARSE_DIM=1024" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        TitanEmbedder(1024, coarse_dim=1024)
    assert caplog.text == ""


# ------------------------------------------------------------------------- Cohere
def test_cohere_v3_batches_up_to_96_texts_per_call(runtime: tuple[Any, Stubber]) -> None:
    client, stubber = runtime
    texts = [f"text {i}" for i in range(100)]
    for chunk in (texts[:96], texts[96:]):
        rows = [[float(len(t))] + [1.0] * 1023 for t in chunk]
        request = {
            "texts": chunk,
            "input_type": "search_document",
            "truncate": "END",
            "embedding_types": ["float"],
        }
        stubber.add_response(
            "invoke_model",
            invoke_answer(
                {
                    "id": "x",
                    "embeddings": {"float": rows},
                    "texts": chunk,
                    "response_type": "embeddings_by_type",
                }
            ),
            invoke_params("cohere.embed-english-v3", request),
        )
    out = CohereEmbedder(1024, client=client).embed(texts)
    assert out.shape == (100, 1024)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)


def test_cohere_v4_asks_for_the_output_dimension_and_reads_a_bare_list(runtime: tuple[Any, Stubber]) -> None:
    client, stubber = runtime
    request = {
        "texts": ["hi"],
        "input_type": "search_document",
        "truncate": "END",
        "embedding_types": ["float"],
        "output_dimension": 256,
    }
    stubber.add_response(
        "invoke_model",
        invoke_answer({"embeddings": [[1.0] * 256]}),
        invoke_params("cohere.embed-v4:0", request),
    )
    embedder = CohereEmbedder(256, model_id="cohere.embed-v4:0", client=client)
    assert embedder.matryoshka
    assert embedder.embed(["hi"]).shape == (1, 256)


def test_cohere_count_mismatch_is_malformed(runtime: tuple[Any, Stubber]) -> None:
    client, stubber = runtime
    stubber.add_response("invoke_model", invoke_answer({"embeddings": {"float": [[1.0] * 1024]}}), ANY_INVOKE)
    with pytest.raises(DependencyFailed, match="1 embeddings for 2 texts"):
        CohereEmbedder(1024, client=client).embed(["a", "b"])


def test_cohere_v3_refuses_another_dimension() -> None:
    with pytest.raises(SettingsError):
        CohereEmbedder(384)


def test_cohere_access_denied_is_reported(runtime: tuple[Any, Stubber]) -> None:
    client, stubber = runtime
    stubber.add_client_error("invoke_model", service_error_code="AccessDeniedException", http_status_code=403)
    with pytest.raises(DependencyFailed, match="AccessDeniedException"):
        CohereEmbedder(1024, client=client).embed(["a"])


# -------------------------------------------------------------------------- Rerank
def rerank_params(query: str, passages: list[str]) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [
            {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": p}}}
            for p in passages
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "numberOfResults": len(passages),
                "modelConfiguration": {"modelArn": RERANK_ARN},
            },
        },
    }


def test_rerank_returns_scores_in_the_passages_order(agent: tuple[Any, Stubber]) -> None:
    client, stubber = agent
    passages = ["Paris is in France", "Bananas are yellow", "Lisbon is in Portugal"]
    stubber.add_response(
        "rerank",
        {
            "results": [
                {"index": 2, "relevanceScore": 0.91},
                {"index": 0, "relevanceScore": 0.40},
                {"index": 1, "relevanceScore": 0.01},
            ]
        },
        rerank_params("where is Lisbon?", passages),
    )
    scores = BedrockReranker(RERANK_ARN, client=client).rerank("where is Lisbon?", passages)
    assert scores == pytest.approx([0.40, 0.01, 0.91])


def test_rerank_of_nothing_makes_no_call(agent: tuple[Any, Stubber]) -> None:
    client, _ = agent
    assert BedrockReranker(RERANK_ARN, client=client).rerank("q", []) == []


def test_a_passage_the_model_left_out_ranks_last(agent: tuple[Any, Stubber]) -> None:
    client, stubber = agent
    stubber.add_response(
        "rerank", {"results": [{"index": 1, "relevanceScore": 0.2}]}, rerank_params("q", ["a", "b"])
    )
    scores = BedrockReranker(RERANK_ARN, client=client).rerank("q", ["a", "b"])
    assert scores[1] == pytest.approx(0.2) and scores[0] < scores[1]


def test_rerank_throttling_becomes_a_dependency_failure(agent: tuple[Any, Stubber]) -> None:
    client, stubber = agent
    stubber.add_client_error("rerank", service_error_code="ThrottlingException", http_status_code=429)
    with pytest.raises(DependencyFailed, match="throttled"):
        BedrockReranker(RERANK_ARN, client=client).rerank("q", ["a"])


@pytest.mark.parametrize(
    "results",
    [[{"index": 5, "relevanceScore": 0.3}], [{"index": 0, "relevanceScore": float("nan")}]],
    ids=["index-out-of-range", "nan-score"],
)
def test_rerank_malformed_results_raise(agent: tuple[Any, Stubber], results: list[dict[str, Any]]) -> None:
    client, stubber = agent
    stubber.add_response("rerank", {"results": results}, rerank_params("q", ["a"]))
    with pytest.raises(DependencyFailed, match="malformed"):
        BedrockReranker(RERANK_ARN, client=client).rerank("q", ["a"])


def test_rerank_needs_a_model_arn() -> None:
    with pytest.raises(SettingsError, match="MEMSTACK_BEDROCK_RERANK_MODEL_ARN"):
        BedrockReranker(None)


# ------------------------------------------------------------------------- factory
def test_one_setting_chooses_each_provider(runtime: tuple[Any, Stubber], agent: tuple[Any, Stubber]) -> None:
    titan = build_embedder(
        load_settings(embedder="bedrock-titan", embedding_dim=1024, coarse_dim=256), runtime[0]
    )
    assert isinstance(titan, TitanEmbedder) and titan.dim == 1024 and titan.client is runtime[0]
    cohere = build_embedder(load_settings(embedder="bedrock-cohere", embedding_dim=1024), runtime[0])
    assert isinstance(cohere, CohereEmbedder) and cohere.model_id == "cohere.embed-english-v3"
    reranker = build_reranker(
        load_settings(reranker="bedrock", bedrock_rerank_model_arn=RERANK_ARN), agent[0]
    )
    assert isinstance(reranker, BedrockReranker) and reranker.client is agent[0]


def test_lazily_created_clients_use_adaptive_retries() -> None:
    embedder = TitanEmbedder(256, region="us-east-1")
    reranker = BedrockReranker(RERANK_ARN, region="us-west-2")
    for client in (embedder.client, reranker.client):
        assert client.meta.config.retries["mode"] == "adaptive"
    assert embedder.client is embedder.client  # created once, reused across invocations
