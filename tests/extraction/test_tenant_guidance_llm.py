"""A tenant's categories and instructions in the exact requests the LLM providers build.

Bedrock Converse through botocore's Stubber (the request as botocore would
send it), an OpenAI-compatible server through ``httpx.MockTransport``: the
tenant's category names are the tool schema's enum, their descriptions and
the instructions follow the fixed system prompt, and an answer filing a
memory under a category the tenant does not have is sent back once.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import httpx
import pytest
from botocore.stub import ANY, Stubber
from memstack.adapters.llm.providers.bedrock_extractor import BedrockExtractor
from memstack.adapters.llm.providers.openai_chat import OpenAIChat
from memstack.adapters.llm.providers.structured import (
    EXTRACTION_PROMPT,
    StructuredExtractor,
    extraction_system,
    extraction_tool,
)
from memstack.models import BUILT_IN_CATEGORIES
from memstack.ports.llm import CategoryChoice, Guidance

from tests.extraction.test_bedrock_extractor import MESSAGE, MODEL, TOKYO, tool_answer

PETS = CategoryChoice("pets", "the user's pets and their care", ("dog", "vet"))
PLANTS = CategoryChoice("plants", "house plants and the garden")
INSTRUCTIONS = "Never store health data. Remember what the user's pets eat."
EXTEND = Guidance(custom=(PETS, PLANTS), instructions=INSTRUCTIONS)
REPLACE = Guidance(custom=(PETS, PLANTS), built_in=False)
PET_ADD = {
    "operations": [{"op": "ADD", "content": "Maya's dog eats salmon.", "kind": "fact", "category": "pets"}]
}


def converse_request(guidance: Guidance) -> dict[str, Any]:
    """The whole Converse request for ``guidance`` (the messages are the default's)."""
    return {
        "modelId": MODEL,
        "system": [{"text": extraction_system(guidance)}, {"cachePoint": {"type": "default"}}],
        "messages": ANY,
        "toolConfig": extraction_tool(guidance.names).config(cache=True),
        "inferenceConfig": {"maxTokens": 1024, "temperature": 0.0},
    }


@pytest.fixture
def bedrock() -> Any:
    return boto3.client("bedrock-runtime", region_name="us-east-1")


def test_bedrock_request_carries_the_tenants_categories_and_instructions(bedrock: Any) -> None:
    sent: list[dict[str, Any]] = []
    bedrock.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse", lambda params, **_: sent.append(params)
    )
    with Stubber(bedrock) as stub:
        stub.add_response("converse", tool_answer(PET_ADD), converse_request(EXTEND))
        ops = BedrockExtractor(MODEL, client=bedrock, sleep=lambda _s: None).extract(
            MESSAGE, [], [TOKYO], EXTEND
        )
        stub.assert_no_pending_responses()
    assert [(o.op, o.category) for o in ops] == [("ADD", "pets")]
    [request] = sent
    system = request["system"][0]["text"]
    # The fixed prompt first (its cache prefix), then the tenant's part.
    assert system.startswith(EXTRACTION_PROMPT)
    assert "- pets: the user's pets and their care" in system and "- plants: house plants" in system
    assert system.rstrip().endswith(INSTRUCTIONS)
    enum = request["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["properties"]["operations"]
    assert enum["items"]["properties"]["category"]["enum"] == [*BUILT_IN_CATEGORIES, "pets", "plants"]


def test_bedrock_replace_mode_offers_only_the_tenants_categories_and_sends_back_a_built_in_one(
    bedrock: Any,
) -> None:
    sent: list[dict[str, Any]] = []
    bedrock.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse", lambda params, **_: sent.append(params)
    )
    built_in = {"operations": [{"op": "ADD", "content": "Maya's dog eats salmon.", "category": "dietary"}]}
    with Stubber(bedrock) as stub:
        stub.add_response("converse", tool_answer(built_in, use_id="bad"), converse_request(REPLACE))
        stub.add_response("converse", tool_answer(PET_ADD, use_id="good"), converse_request(REPLACE))
        ops = BedrockExtractor(MODEL, client=bedrock, sleep=lambda _s: None).extract(
            MESSAGE, [], [TOKYO], REPLACE
        )
        stub.assert_no_pending_responses()
    assert [o.category for o in ops] == ["pets"]
    tool = sent[0]["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]
    assert tool["properties"]["operations"]["items"]["properties"]["category"]["enum"] == ["pets", "plants"]
    assert "does not use the categories of the examples" in sent[0]["system"][0]["text"]
    feedback = sent[1]["messages"][-1]["content"][0]["toolResult"]["content"][0]["text"]
    assert "'dietary' is not one of: pets, plants" in feedback


def test_bedrock_without_a_configuration_sends_the_default_request(bedrock: Any) -> None:
    with Stubber(bedrock) as stub:
        stub.add_response("converse", tool_answer({"operations": []}), converse_request(Guidance()))
        BedrockExtractor(MODEL, client=bedrock, sleep=lambda _s: None).extract(MESSAGE, [], [TOKYO])
        stub.assert_no_pending_responses()
    assert extraction_system(Guidance()) == EXTRACTION_PROMPT


def test_a_model_that_keeps_a_foreign_category_falls_back_to_the_tenants_lexicon(bedrock: Any) -> None:
    wrong = {"operations": [{"op": "ADD", "content": "Maya's dog eats salmon.", "category": "dietary"}]}
    message = MESSAGE.model_copy(update={"content": "I took my dog to the vet."})
    with Stubber(bedrock) as stub:
        stub.add_response("converse", tool_answer(wrong, use_id="a"), converse_request(REPLACE))
        stub.add_response("converse", tool_answer(wrong, use_id="b"), converse_request(REPLACE))
        ops = BedrockExtractor(MODEL, client=bedrock, sleep=lambda _s: None).extract(message, [], [], REPLACE)
    # The message kept as is, filed by the tenant's keywords ("dog", "vet"), never under "dietary".
    assert [(o.op, o.content, o.category) for o in ops] == [("ADD", "I took my dog to the vet.", "pets")]


def test_openai_request_carries_the_tenants_categories_and_instructions() -> None:
    sent: list[dict[str, Any]] = []
    arguments = json.dumps(PET_ADD)

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "record_memory_operations", "arguments": arguments},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        return httpx.Response(
            200,
            json={
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": usage,
            },
        )

    client = httpx.Client(transport=httpx.MockTransport(answer))
    chat = OpenAIChat("http://llm.test/v1", "m", client=client, sleep=lambda _s: None, mode="tools")
    ops = StructuredExtractor(chat, name="openai").extract(MESSAGE, [], [TOKYO], EXTEND)
    assert [o.category for o in ops] == ["pets"]
    [body] = sent
    assert body["messages"][0] == {"role": "system", "content": extraction_system(EXTEND)}
    assert INSTRUCTIONS in body["messages"][0]["content"]
    parameters = body["tools"][0]["function"]["parameters"]
    assert parameters == extraction_tool(EXTEND.names).schema
    assert parameters["properties"]["operations"]["items"]["properties"]["category"]["enum"][-2:] == [
        "pets",
        "plants",
    ]
