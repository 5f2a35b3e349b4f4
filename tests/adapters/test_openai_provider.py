"""The OpenAI-compatible provider against recorded answers of a real server (llama-cpp-python + Gemma 3 270M).

``tests/fixtures/openai/*.json`` were recorded by ``scripts/record_openai_responses.py``:
each request as the provider sent it and the server's answer as received. They
are replayed through ``httpx.MockTransport``, which also checks that the
provider still sends what the server was sent. Hand-made answers (rate limits,
refusals, malformed tool calls) copy the recorded shape.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from aws_lambda_powertools import Metrics
from memstack.adapters.llm.providers.openai_chat import OpenAIChat
from memstack.adapters.llm.providers.openai_provider import openai_extractor, openai_summariser
from memstack.adapters.llm.providers.structured import (
    EXTRACTION_PROMPT,
    EXTRACTION_TOOL,
    StructuredExtractor,
    StructuredSummariser,
)
from memstack.errors import DependencyFailed
from memstack.factory import build_service
from memstack.models import MemoryFilters, MemoryRecord, Message, Tier
from memstack.settings import load_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai"
BASE = "http://llm.test/v1"
MESSAGE = Message(
    id="m2",
    speaker="Kim",
    content="I moved to Osaka last month.",
    timestamp=datetime(2024, 2, 5, 9, tzinfo=UTC),
)
TOKYO = MemoryRecord(id="mem-tokyo", tenant="t", user_id="u", content="Kim lives in Tokyo.")


def recorded(name: str) -> list[dict[str, Any]]:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def without_system(body: dict[str, Any]) -> dict[str, Any]:
    messages = [m for m in body["messages"] if m["role"] != "system"]
    return {**body, "messages": messages}


class Replay:
    """Answers each request with the next recorded answer; keeps what was sent."""

    def __init__(self, exchanges: list[dict[str, Any]], check: bool = True) -> None:
        self.exchanges = list(exchanges)
        self.check = check
        self.sent: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.sent.append(body)
        self.headers.append(request.headers)
        assert self.exchanges, f"unexpected request #{len(self.sent)}"
        exchange = self.exchanges.pop(0)
        if self.check and "request" in exchange:
            # The system prompt is ours and may be reworded; everything else is as recorded.
            assert without_system(body) == without_system(exchange["request"]), "no longer sent as recorded"
        if isinstance(exchange.get("raise"), Exception):
            raise exchange["raise"]
        return httpx.Response(exchange["status"], json=exchange["response"], headers=exchange.get("headers"))


@pytest.fixture
def metrics() -> Metrics:
    m = Metrics(namespace="memstack", service="openai-test")
    m.clear_metrics()
    return m


def chat(replay: Callable[[httpx.Request], httpx.Response], metrics: Metrics, **kw: Any) -> OpenAIChat:
    client = httpx.Client(transport=httpx.MockTransport(replay))
    return OpenAIChat(BASE, "gemma3-270m", client=client, metrics=metrics, sleep=lambda _s: None, **kw)


def tool_call(arguments: str, call_id: str = "call_1", name: str = EXTRACTION_TOOL.name) -> dict[str, Any]:
    """A chat completion in the shape the recorded server answers with."""
    answer = copy.deepcopy(recorded("extract-tools")[0]["response"])
    call = answer["choices"][0]["message"]["tool_calls"][0]
    call["id"], call["function"]["name"], call["function"]["arguments"] = call_id, name, arguments
    return answer


def test_tools_mode_round_trip_as_recorded(metrics: Metrics) -> None:
    replay = Replay(recorded("extract-tools"))
    extractor = StructuredExtractor(chat(replay, metrics, mode="tools"), name="openai", max_tokens=400)
    assert extractor.extract(MESSAGE, [], [TOKYO]) == []  # the small model's (valid) answer: no change
    sent = replay.sent[0]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "record_memory_operations"}}
    assert sent["tools"][0]["function"]["parameters"] == EXTRACTION_TOOL.schema
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert sent["messages"][0]["content"] == EXTRACTION_PROMPT
    assert "mem-tokyo" in sent["messages"][1]["content"]
    assert extractor.model_calls == 1
    emf = metrics.serialize_metric_set()
    assert emf["ExtractionInputTokens"] == [471.0] and emf["ExtractionOutputTokens"] == [9.0]


def test_json_mode_detects_the_response_format_the_server_takes(metrics: Metrics) -> None:
    exchanges = recorded("extract-json-schema")
    assert exchanges[0]["status"] == 500 and "response_format" in json.dumps(exchanges[0]["response"])
    replay = Replay(exchanges)
    openai = chat(replay, metrics, mode="json_schema")
    ops = StructuredExtractor(openai, name="openai", max_tokens=400).extract(MESSAGE, [], [TOKYO])
    assert ops == []
    first, second = replay.sent
    assert first["response_format"]["type"] == "json_schema"
    assert second["response_format"] == {"type": "json_object", "schema": EXTRACTION_TOOL.schema}
    assert "tools" not in second
    # A request the server rejects is not retried; the second shape is remembered for later calls.
    assert openai.calls == 2 and openai.json_format == "json_object"


def test_summariser_sends_the_parse_error_back_to_the_tool_call(metrics: Metrics) -> None:
    replay = Replay(recorded("summarise-tools"))
    summariser = StructuredSummariser(chat(replay, metrics, mode="tools"), name="openai", metrics=metrics)
    summary = summariser.summarise(["Kim: I moved to Osaka.", "Kim: I work as a nurse."], 60)
    # The recorded model cut its first JSON short; the corrected retry was valid (if poor).
    assert summary == ":{"
    retry = replay.sent[1]["messages"]
    first_call = replay.sent[0]
    assert [m["role"] for m in retry] == ["system", "user", "assistant", "tool"]
    assert retry[3]["tool_call_id"] == retry[2]["tool_calls"][0]["id"]
    assert "not valid JSON" in retry[3]["content"]
    assert first_call["max_tokens"] == 60 + 64  # room for the JSON around the text
    assert summariser.synthesise(["Kim lives in Osaka.", "Kim works as a nurse."], [], 60) == []


def test_malformed_twice_falls_back_like_bedrock(metrics: Metrics) -> None:
    bad = '{"operations": [{"op": "UPDATE", "content": "Kim lives in Osaka."}]}'  # no target_id
    replay = Replay(
        [{"status": 200, "response": tool_call(bad, "c1")}, {"status": 200, "response": tool_call(bad, "c2")}]
    )
    ops = StructuredExtractor(chat(replay, metrics, mode="tools"), name="openai", metrics=metrics).extract(
        MESSAGE, [], [TOKYO]
    )
    assert [(o.op, o.content) for o in ops] == [("ADD", MESSAGE.content)]
    assert "target_id" in replay.sent[1]["messages"][-1]["content"]
    assert metrics.serialize_metric_set()["ExtractionFallbacks"] == [1.0]


def test_a_corrected_answer_is_used(metrics: Metrics) -> None:
    good = json.dumps(
        {
            "operations": [
                {"op": "UPDATE", "target_id": "mem-tokyo", "content": "Kim lives in Osaka.", "kind": "fact"}
            ]
        }
    )
    replay = Replay(
        [
            {"status": 200, "response": tool_call("{not json", "c1")},
            {"status": 200, "response": tool_call(good)},
        ]
    )
    ops = StructuredExtractor(chat(replay, metrics, mode="tools"), name="openai").extract(
        MESSAGE, [], [TOKYO]
    )
    assert [(o.op, o.target_id, o.content) for o in ops] == [("UPDATE", "mem-tokyo", "Kim lives in Osaka.")]


def test_auto_mode_switches_to_json_when_the_server_has_no_tools(metrics: Metrics) -> None:
    no_tools = {
        "error": {"message": "tools are not supported by this model", "type": "invalid_request_error"}
    }
    json_answer = recorded("extract-json-schema")[1]["response"]
    replay = Replay(
        [
            {"status": 400, "response": no_tools},
            {"status": 200, "response": json_answer},
            {"status": 200, "response": json_answer},
        ],
        check=False,
    )
    openai = chat(replay, metrics)  # mode="auto"
    extractor = StructuredExtractor(openai, name="openai")
    assert extractor.extract(MESSAGE, [], [TOKYO]) == []
    assert "tools" in replay.sent[0] and replay.sent[1]["response_format"]["type"] == "json_schema"
    assert openai.structured == "json_schema"
    extractor.extract(MESSAGE, [], [TOKYO])  # later calls go straight to JSON mode
    assert "tools" not in replay.sent[2]


def test_rate_limits_and_server_errors_are_retried_then_fail_clearly(metrics: Metrics) -> None:
    ok = recorded("extract-tools")[0]["response"]
    waits: list[float] = []
    replay = Replay(
        [
            {"status": 429, "response": {"error": {"message": "slow down"}}, "headers": {"Retry-After": "3"}},
            {"status": 503, "response": {"error": {"message": "loading model"}}},
            {"status": 200, "response": ok},
        ],
        check=False,
    )
    openai = chat(replay, metrics, mode="tools")
    openai.sleep = waits.append
    assert StructuredExtractor(openai, name="openai").extract(MESSAGE, [], [TOKYO]) == []
    assert waits == [3.0, 2.0] and openai.calls == 3

    down = Replay([{"raise": httpx.ConnectError("refused")}] * 3, check=False)
    with pytest.raises(DependencyFailed, match="unreachable: ConnectError"):
        StructuredExtractor(chat(down, metrics, mode="tools"), name="openai").extract(MESSAGE, [], [TOKYO])


def test_other_errors_fail_at_once_without_leaking_the_key(metrics: Metrics) -> None:
    denied = Replay([{"status": 401, "response": {"error": {"message": "invalid api key"}}}], check=False)
    openai = chat(denied, metrics, mode="tools", api_key="sk-secret-123")
    with pytest.raises(DependencyFailed, match="HTTP 401") as err:
        StructuredExtractor(openai, name="openai").extract(MESSAGE, [], [TOKYO])
    assert "sk-secret-123" not in str(err.value)
    assert denied.headers[0]["authorization"] == "Bearer sk-secret-123"
    assert openai.calls == 1


def test_settings_pick_the_server_models_and_key(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path,
        llm="openai",
        openai_base_url="http://127.0.0.1:11434/v1/",
        openai_model="small-model",
        openai_synthesis_model="big-model",
        openai_api_key="sk-test-key",
        openai_structured_output="json_schema",
    )
    extractor = openai_extractor(settings)
    summariser = openai_summariser(settings)
    assert extractor.name == "openai" and isinstance(extractor.chat, OpenAIChat)
    assert extractor.chat.url == "http://127.0.0.1:11434/v1/chat/completions"
    assert (extractor.chat.model, summariser.chat.model) == ("small-model", "big-model")  # type: ignore[attr-defined]
    assert extractor.chat.structured == "json_schema"  # type: ignore[attr-defined]
    assert "sk-test-key" not in repr(settings)


def test_memstack_llm_openai_drives_the_extract_job(tmp_path: Path) -> None:
    answer = json.dumps(
        {"operations": [{"op": "ADD", "content": "Kim keeps bees.", "kind": "fact", "category": "hobbies"}]}
    )
    replay = Replay([{"status": 200, "response": tool_call(answer)}], check=False)
    settings = load_settings(data_dir=tmp_path, embedder="hashing", llm="openai", openai_model="m")
    service = build_service(settings, openai_http=httpx.Client(transport=httpx.MockTransport(replay)))
    try:
        service.add("t", "u", [Message(id="m1", speaker="Kim", content="I keep bees.")], sync=True)
        records, _ = service.list("t", "u", MemoryFilters(tier=Tier.LTM))
    finally:
        service.close()
    assert [(r.content, str(r.category), r.source_ids) for r in records] == [
        ("Kim keeps bees.", "hobbies", ["m1"])
    ]
    assert replay.sent[0]["model"] == "m"
