"""The Bedrock extractor against a stubbed bedrock-runtime client (botocore Stubber; moto has no Converse)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics
from botocore.stub import ANY, Stubber
from memstack.adapters.llm.providers.bedrock_converse import converse_tool
from memstack.adapters.llm.providers.bedrock_extractor import TOOL, BedrockExtractor
from memstack.errors import DependencyFailed
from memstack.factory import build_extractor
from memstack.models import Category, Kind, MemoryRecord, Message
from memstack.settings import load_settings

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
MESSAGE = Message(
    id="m2",
    speaker="Maya",
    content="We moved to Osaka in the week of 11 May 2026.",
    timestamp=datetime(2026, 5, 18, 10, tzinfo=UTC),
)
TOKYO = MemoryRecord(id="mem-tokyo", tenant="t", user_id="u", content="Maya lives in Tokyo.")


def tool_answer(payload: Any, tokens: tuple[int, int] = (120, 40), use_id: str = "tu1") -> dict[str, Any]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": use_id, "name": TOOL.name, "input": payload}}],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": tokens[0], "outputTokens": tokens[1], "totalTokens": sum(tokens)},
        "metrics": {"latencyMs": 350},
    }


EXPECTED = {
    "modelId": MODEL,
    "system": ANY,
    "messages": ANY,
    "toolConfig": TOOL.config(cache=True),
    "inferenceConfig": {"maxTokens": 1024, "temperature": 0.0},
}
VALID = {
    "operations": [
        {
            "op": "UPDATE",
            "target_id": "mem-tokyo",
            "content": "Maya lives in Osaka.",
            "kind": "fact",
            "category": "personal_details",
        },
        {
            "op": "ADD",
            "content": "Maya moved to Osaka in May 2026.",
            "kind": "event",
            "category": "personal_details",
            "event_time": "2026-05-11",
        },
    ]
}


@pytest.fixture
def client() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1")


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    m = Metrics(namespace="memstack", service="extraction-test")
    m.clear_metrics()
    yield m
    m.clear_metrics()


@pytest.fixture
def sent(client: Any) -> list[dict[str, Any]]:
    """Every Converse request the extractor made, as sent."""
    calls: list[dict[str, Any]] = []
    client.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse", lambda params, **_: calls.append(params)
    )
    return calls


def extractor(client: Any, metrics: Metrics) -> BedrockExtractor:
    return BedrockExtractor(MODEL, client=client, metrics=metrics, sleep=lambda _s: None)


def test_valid_tool_answer_becomes_operations_and_counts_tokens(
    client: Any, metrics: Metrics, sent: list[dict[str, Any]]
) -> None:
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer(VALID), EXPECTED)
        ops = extractor(client, metrics).extract(MESSAGE, [], [TOKYO])
        stub.assert_no_pending_responses()
    assert [(o.op, o.target_id, o.content) for o in ops] == [
        ("UPDATE", "mem-tokyo", "Maya lives in Osaka."),
        ("ADD", None, "Maya moved to Osaka in May 2026."),
    ]
    assert ops[1].kind == Kind.EVENT and ops[1].category == Category.PERSONAL_DETAILS
    assert ops[1].event_time == datetime(2026, 5, 11, tzinfo=UTC)
    assert all(o.source_ids == ["m2"] for o in ops)
    # The request carries the message, its time and the neighbours' ids.
    text = sent[0]["messages"][0]["content"][0]["text"]
    assert "mem-tokyo" in text and "2026-05-18T10:00:00+00:00" in text
    emf = metrics.serialize_metric_set()
    assert emf["ExtractionInputTokens"] == [120.0] and emf["ExtractionOutputTokens"] == [40.0]


def test_a_contradiction_is_a_conflict_with_the_memory_it_contradicts(
    client: Any, metrics: Metrics, sent: list[dict[str, Any]]
) -> None:
    never = MemoryRecord(
        id="mem-never", tenant="t", user_id="u", content="Maya has never written a Flask route."
    )
    said = Message(id="m3", speaker="Maya", content="I implemented the login route in Flask last week.")
    answer = {
        "operations": [
            {
                "op": "CONFLICT",
                "target_id": "mem-never",
                "content": "Maya implemented the login route in Flask.",
                "kind": "event",
                "category": "technical_skills",
            }
        ]
    }
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer(answer), EXPECTED)
        ops = extractor(client, metrics).extract(said, [], [never])
        stub.assert_no_pending_responses()
    assert [(o.op, o.target_id, o.content, o.source_ids) for o in ops] == [
        ("CONFLICT", "mem-never", "Maya implemented the login route in Flask.", ["m3"])
    ]
    # The tool offers the decision and the prompt says when to take it.
    item = sent[0]["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["properties"]["operations"][
        "items"
    ]
    assert item["properties"]["op"]["enum"] == ["ADD", "UPDATE", "DELETE", "NONE", "CONFLICT"]
    assert "CONFLICT" in sent[0]["system"][0]["text"]


def test_a_conflict_without_its_target_is_malformed(client: Any, metrics: Metrics) -> None:
    untargeted = {"operations": [{"op": "CONFLICT", "content": "Maya lives in Kyoto."}]}
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer(untargeted, use_id="bad1"), EXPECTED)
        stub.add_response("converse", tool_answer({"operations": [{"op": "NONE"}]}, use_id="ok"), EXPECTED)
        ops = extractor(client, metrics).extract(MESSAGE, [], [TOKYO])
        stub.assert_no_pending_responses()
    assert [o.op for o in ops] == ["NONE"]


def test_malformed_answer_is_retried_once_with_the_validation_error(
    client: Any, metrics: Metrics, sent: list[dict[str, Any]]
) -> None:
    malformed = {"operations": [{"op": "UPDATE", "content": "Maya lives in Osaka."}]}  # no target_id
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer(malformed, use_id="bad1"), EXPECTED)
        stub.add_response("converse", tool_answer(VALID, use_id="good"), EXPECTED)
        ops = extractor(client, metrics).extract(MESSAGE, [], [TOKYO])
        stub.assert_no_pending_responses()
    assert [o.op for o in ops] == ["UPDATE", "ADD"]
    retry = sent[1]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    result = retry[2]["content"][0]["toolResult"]
    assert result["toolUseId"] == "bad1" and result["status"] == "error"
    assert "target_id" in result["content"][0]["text"]
    assert metrics.serialize_metric_set()["ExtractionInputTokens"] == [120.0, 120.0]


def test_unknown_target_counts_as_malformed(client: Any, metrics: Metrics) -> None:
    invented = {"operations": [{"op": "DELETE", "target_id": "not-shown"}]}
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer(invented), EXPECTED)
        stub.add_response("converse", tool_answer({"operations": [{"op": "NONE"}]}), EXPECTED)
        ops = extractor(client, metrics).extract(MESSAGE, [], [TOKYO])
    assert [o.op for o in ops] == ["NONE"]


def test_malformed_twice_falls_back_to_adding_the_raw_fact(client: Any, metrics: Metrics) -> None:
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer({"ops": "nonsense"}), EXPECTED)
        stub.add_response("converse", tool_answer({"operations": [{"op": "MERGE"}]}), EXPECTED)
        ops = extractor(client, metrics).extract(MESSAGE, [], [TOKYO])
    assert [(o.op, o.content, o.source_ids) for o in ops] == [("ADD", MESSAGE.content, ["m2"])]
    assert ops[0].category == Category.PERSONAL_DETAILS
    assert metrics.serialize_metric_set()["ExtractionFallbacks"] == [1.0]


def test_throttling_then_success(client: Any, metrics: Metrics) -> None:
    waits: list[float] = []
    with Stubber(client) as stub:
        stub.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
        stub.add_response("converse", tool_answer(VALID), EXPECTED)
        ops = BedrockExtractor(MODEL, client=client, metrics=metrics, sleep=waits.append).extract(
            MESSAGE, [], [TOKYO]
        )
        stub.assert_no_pending_responses()
    assert [o.op for o in ops] == ["UPDATE", "ADD"]
    assert len(waits) == 1


def test_throttling_that_never_ends_is_a_dependency_failure(client: Any, metrics: Metrics) -> None:
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
        with pytest.raises(DependencyFailed, match="throttled"):
            BedrockExtractor(MODEL, client=client, metrics=metrics, sleep=lambda _s: None).extract(
                MESSAGE, [], [TOKYO]
            )


def test_other_errors_are_not_retried(client: Any, metrics: Metrics) -> None:
    with Stubber(client) as stub:
        stub.add_client_error("converse", "AccessDeniedException", "no access to model", 403)
        with pytest.raises(DependencyFailed, match="AccessDeniedException"):
            extractor(client, metrics).extract(MESSAGE, [], [TOKYO])


def test_assistant_turns_cost_no_call(client: Any, metrics: Metrics) -> None:
    with Stubber(client):
        assert (
            extractor(client, metrics).extract(MESSAGE.model_copy(update={"role": "assistant"}), [], []) == []
        )


def test_converse_tool_helper_returns_input_and_usage(client: Any) -> None:
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer({"summary": "x"}, tokens=(7, 3)))
        payload, usage = converse_tool(
            client,
            model_id=MODEL,
            system="s",
            messages=[{"role": "user", "content": [{"text": "hi"}]}],
            tool=TOOL,
            max_tokens=100,
            temperature=0.0,
        )
    assert payload == {"summary": "x"}
    assert (usage["inputTokens"], usage["outputTokens"]) == (7, 3)


def test_factory_builds_the_configured_extractor(tmp_path: Any, client: Any) -> None:
    local = build_extractor(load_settings(data_dir=tmp_path))
    assert local.name == "local"
    bedrock = build_extractor(
        load_settings(
            data_dir=tmp_path, llm="bedrock", bedrock_extraction_model="m-1", bedrock_max_tokens=300
        ),
        client,
    )
    assert isinstance(bedrock, BedrockExtractor)
    assert (bedrock.model_id, bedrock.max_tokens, bedrock.client) == ("m-1", 300, client)


def test_prompt_caching_marks_the_fixed_prefix_and_counts_cached_tokens(
    client: Any, metrics: Metrics, sent: list[dict[str, Any]]
) -> None:
    cached = tool_answer(VALID)
    cached["usage"].update(cacheReadInputTokens=900, cacheWriteInputTokens=0)
    with Stubber(client) as stub:
        stub.add_response("converse", cached, EXPECTED)
        extractor(client, metrics).extract(MESSAGE, [], [TOKYO])
    request = sent[0]
    # A cache point after the system prompt and after the tool schema: the fixed prefix of every call.
    assert request["system"][-1] == {"cachePoint": {"type": "default"}}
    assert request["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    # The message itself comes after both, so it never breaks the cached prefix.
    assert "cachePoint" not in str(request["messages"])
    emf = metrics.serialize_metric_set()
    assert emf["ExtractionCachedInputTokens"] == [900.0] and emf["ExtractionCacheWriteInputTokens"] == [0.0]


def test_prompt_caching_can_be_turned_off_for_models_without_it(
    client: Any, metrics: Metrics, sent: list[dict[str, Any]]
) -> None:
    plain = {**EXPECTED, "toolConfig": TOOL.config()}
    with Stubber(client) as stub:
        stub.add_response("converse", tool_answer(VALID), plain)
        BedrockExtractor(MODEL, client=client, metrics=metrics, prompt_cache=False).extract(
            MESSAGE, [], [TOKYO]
        )
    assert sent[0]["system"] == [{"text": sent[0]["system"][0]["text"]}]
    assert "ExtractionCachedInputTokens" not in metrics.serialize_metric_set()


def test_extraction_and_consolidation_models_are_configured_apart(tmp_path: Any, client: Any) -> None:
    from memstack.factory import build_summariser

    settings = load_settings(
        data_dir=tmp_path,
        llm="bedrock",
        bedrock_extraction_model="light-model",
        bedrock_synthesis_model="strong-model",
        bedrock_prompt_cache="auto",
    )
    extractor_ = build_extractor(settings, client)
    summariser = build_summariser(settings, client)
    assert extractor_.model_id == "light-model"  # type: ignore[attr-defined]
    assert summariser.model_id == "strong-model"  # type: ignore[attr-defined]
    assert not extractor_.converse.cache  # type: ignore[attr-defined]  # auto: not a caching model
    cached = load_settings(
        data_dir=tmp_path, llm="bedrock", bedrock_extraction_model="us.amazon.nova-lite-v1:0"
    )
    assert build_extractor(cached, client).converse.cache  # type: ignore[attr-defined]
    forced = load_settings(data_dir=tmp_path, llm="bedrock", bedrock_prompt_cache="true")
    assert build_extractor(forced, client).converse.cache  # type: ignore[attr-defined]


def test_auto_caches_only_where_the_model_caches_a_prefix_that_long(tmp_path: Any, client: Any) -> None:
    """Issue 23, item 4: Claude Haiku 4.5 caches a prefix of 4,096 tokens or more; the extraction prefix
    is about 1,100, so cache points there were never used. auto sends them only where they pay."""
    from memstack.adapters.llm.providers.bedrock_converse import cache_minimum_tokens, prefix_tokens
    from memstack.adapters.llm.providers.bedrock_extractor import SYSTEM_PROMPT
    from memstack.adapters.llm.providers.bedrock_extractor import TOOL as EXTRACTION
    from memstack.factory import build_summariser

    extraction_prefix = prefix_tokens(SYSTEM_PROMPT, EXTRACTION)
    assert 1000 <= extraction_prefix < 1300  # the figure the docs quote
    haiku = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert cache_minimum_tokens(haiku) == 4096
    default = load_settings(data_dir=tmp_path, llm="bedrock")
    assert default.bedrock.extraction_model == haiku
    assert not build_extractor(default, client).converse.cache  # type: ignore[attr-defined]
    # The summary and synthesis prefixes are below even Sonnet's 1,024.
    assert not build_summariser(default, client).chat.cache  # type: ignore[attr-defined]
    # Sonnet 4.5 for extraction: 1,024 minimum, the prefix qualifies.
    sonnet = load_settings(
        data_dir=tmp_path,
        llm="bedrock",
        bedrock_extraction_model="us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    )
    assert build_extractor(sonnet, client).converse.cache  # type: ignore[attr-defined]
    assert cache_minimum_tokens("anthropic.claude-3-haiku-20240307-v1:0") is None  # takes no cache points
