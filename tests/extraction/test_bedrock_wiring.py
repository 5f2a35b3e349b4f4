"""MEMSTACK_LLM=bedrock: the service extracts through Converse (stubbed) into versioned LTM memories."""

from __future__ import annotations

from pathlib import Path

import boto3
from aws_lambda_powertools import Metrics
from botocore.stub import ANY, Stubber
from memstack.adapters.llm.providers.bedrock_extractor import TOOL
from memstack.factory import build_service
from memstack.models import Category, Kind, MemoryFilters, Message, Tier
from memstack.settings import load_settings


def answer(operations: list[dict[str, object]]) -> dict[str, object]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [
                    {"toolUse": {"toolUseId": "t", "name": TOOL.name, "input": {"operations": operations}}}
                ],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70},
        "metrics": {"latencyMs": 10},
    }


def test_bedrock_extractor_drives_the_extract_job(tmp_path: Path) -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    settings = load_settings(
        data_dir=tmp_path, embedder="hashing", llm="bedrock", bedrock_extraction_model="m-x"
    )
    service = build_service(settings, bedrock_runtime=client)
    expected = {"modelId": "m-x", "system": ANY, "messages": ANY, "toolConfig": ANY, "inferenceConfig": ANY}
    try:
        with Stubber(client) as stub:
            stub.add_response(
                "converse",
                answer(
                    [{"op": "ADD", "content": "The user keeps bees.", "kind": "fact", "category": "hobbies"}]
                ),
                expected,
            )
            service.add("t", "u", [Message(id="m1", content="I keep bees.")], sync=True)
            records, _ = service.list("t", "u", MemoryFilters(tier=Tier.LTM))
            [bees] = records
            tombstone = [{"op": "DELETE", "target_id": bees.id}]
            stub.add_response("converse", answer(tombstone), expected)
            service.add("t", "u", [Message(id="m2", content="I gave up beekeeping.")], sync=True)
            stub.assert_no_pending_responses()
        chain = service.history("t", "u", bees.id)
    finally:
        service.close()
        Metrics(namespace="memstack").clear_metrics()
    assert (bees.content, bees.kind, bees.category, bees.source_ids) == (
        "The user keeps bees.",
        Kind.FACT,
        Category.HOBBIES,
        ["m1"],
    )
    assert [r.deleted for r in chain] == [False, True]
