"""The extractive summariser, the Bedrock summariser (botocore Stubber), and the grouping of turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from memstack.adapters.llm.providers.bedrock_summariser import SUMMARY_TOOL, SYNTHESIS_TOOL, BedrockSummariser
from memstack.adapters.llm.rules.extractive_summariser import (
    ExtractiveSummariser,
    estimate_tokens,
    split_sentences,
)
from memstack.domain.consolidation.grouping import classify, group_entries
from memstack.errors import DependencyFailed
from memstack.models import Category, Kind, MemoryRecord, Message, Scope
from memstack.ports.stm import StmEntry

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_extractive_summary_keeps_the_central_sentences_within_budget() -> None:
    texts = [
        "Sam: I train vision models with PyTorch.",
        "Sam: PyTorch is what I use for training models. The weather is nice.",
        "Sam: Training models in PyTorch takes most of my day.",
        "Sam: I had pasta for lunch.",
    ]
    s = ExtractiveSummariser()
    budget = 24
    summary = s.summarise(texts, budget)
    assert estimate_tokens(summary) <= budget
    assert "PyTorch" in summary
    assert "pasta" not in summary and "weather" not in summary  # off-topic sentences are the least central
    assert summary == s.summarise(texts, budget)  # deterministic
    assert summary.count("Sam:") == 1  # the speaker is named once per run of their sentences
    assert len(s.summarise(texts, 1000)) > len(summary)


def test_an_over_long_single_sentence_is_cut_to_the_budget() -> None:
    text = "Sam: " + " ".join(f"word{i}" for i in range(200)) + "."
    out = ExtractiveSummariser().summarise([text], 20)
    assert 0 < estimate_tokens(out) <= 21 and out.endswith("…")


def test_speaker_prefix_carries_to_each_sentence() -> None:
    assert split_sentences("Ann: I moved. Then I settled in!") == ["Ann: I moved.", "Ann: Then I settled in!"]


def test_extractive_synthesis_draws_on_summaries_and_existing_memories() -> None:
    existing = [MemoryRecord(tenant="t", user_id="u", content="Sam is a machine learning engineer.")]
    out = ExtractiveSummariser().synthesise(
        ["Sam: I use PyTorch for machine learning.", "Sam: Machine learning with PyTorch is my job."],
        existing,
        60,
    )
    assert len(out) == 1 and "PyTorch" in out[0] and estimate_tokens(out[0]) <= 60
    assert ExtractiveSummariser().synthesise([], [], 60) == []


class _NoMetrics:
    """Stands in for Powertools Metrics: records what would be published."""

    def __init__(self) -> None:
        self.added: list[tuple[str, float]] = []

    def add_metric(self, name: str, unit: object, value: float) -> None:
        self.added.append((name, value))


def _converse_response(tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {
        "output": {
            "message": {
                "role": "assistant",
                "content": [{"toolUse": {"toolUseId": "t1", "name": tool, "input": tool_input}}],
            }
        },
        "stopReason": "tool_use",
        "usage": {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150},
        "metrics": {"latencyMs": 10},
    }


def test_bedrock_summariser_forces_its_tool_and_bounds_the_answer() -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    metrics = _NoMetrics()
    summariser = BedrockSummariser("anthropic.claude-3-haiku-20240307-v1:0", client=client, metrics=metrics)
    with Stubber(client) as stub:
        stub.add_response(
            "converse",
            _converse_response("record_summary", {"summary": "Sam trains vision models with PyTorch daily."}),
            {
                "modelId": "anthropic.claude-3-haiku-20240307-v1:0",
                "system": ANY,
                "messages": ANY,
                # The budget plus room for the JSON around the text.
                "inferenceConfig": {"maxTokens": 128, "temperature": 0.0},
                "toolConfig": SUMMARY_TOOL.config(cache=True),
            },
        )
        long_memories = ["Sam mainly uses PyTorch.", " ".join(["very"] * 100) + " long"]
        stub.add_response("converse", _converse_response("record_memories", {"memories": long_memories}))
        assert summariser.summarise(["Sam: I train vision models with PyTorch."], 64).startswith("Sam trains")
        out = summariser.synthesise(["Sam trains with PyTorch."], [], 20)
        stub.assert_no_pending_responses()
    assert out[0] == "Sam mainly uses PyTorch." and sum(estimate_tokens(m) for m in out) <= 21
    assert summariser.usage == {"inputTokens": 240, "outputTokens": 60}
    assert ("ConsolidationInputTokens", 120) in metrics.added and ("ConsolidationCalls", 1) in metrics.added
    assert SYNTHESIS_TOOL.name == "record_memories"


def test_bedrock_summariser_retries_a_text_answer_then_falls_back_and_fails_on_errors() -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    waits: list[float] = []
    metrics = _NoMetrics()
    summariser = BedrockSummariser("m", client=client, metrics=metrics, sleep=waits.append)
    prose = {
        "output": {"message": {"role": "assistant", "content": [{"text": "Here is a summary"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    sent: list[dict] = []
    client.meta.events.register(
        "provide-client-params.bedrock-runtime.Converse", lambda params, **_: sent.append(params)
    )
    with Stubber(client) as stub:
        stub.add_response("converse", prose)
        stub.add_response("converse", prose)  # the corrected retry answers in prose again
        for _ in range(3):  # the first try and two retries, all throttled
            stub.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
        turns = ["Sam: I train vision models with PyTorch every day."]
        # Twice malformed: the offline summary still folds the turns in.
        assert summariser.summarise(turns, 32) == ExtractiveSummariser().summarise(turns, 32)
        with pytest.raises(DependencyFailed, match="throttled"):
            summariser.summarise(["x"], 32)
    assert "record_summary" in sent[1]["messages"][-1]["content"][0]["text"]
    assert ("ConsolidationFallbacks", 1) in metrics.added
    assert len(waits) == 2


def _entry(
    mid: str, text: str, minutes: float, *, scope: Scope = Scope.USER, session: str = "s1"
) -> StmEntry:
    at = T0 + timedelta(minutes=minutes)
    msg = Message(id=mid, content=text, timestamp=at)
    return StmEntry(
        tenant="t",
        user_id="u",
        session_id=session,
        scope=scope,
        message=msg,
        received_at=at,
        expires_at=2_000_000_000,
    )


def test_classify_reads_kind_and_category_from_cues() -> None:
    assert classify("I love cooking vegan food") == (Kind.PREFERENCE, Category.DIETARY)
    assert classify("Yesterday I flew to Paris") == (Kind.EVENT, Category.TRAVEL)
    assert classify("My sister lives in Boston") == (Kind.FACT, Category.RELATIONSHIPS)


def test_groups_split_by_topic_time_window_size_and_context_session() -> None:
    entries = [
        _entry("a", "I code in Python at work", 0),
        _entry("b", "I use PyTorch for ML models", 5),
        _entry("c", "I learned Rust programming", 60 * 30),  # 30 hours later: a new window
        _entry("d", "My sister lives in Boston", 10),
        _entry("e", "Python code review today", 20, scope=Scope.CONTEXT, session="s9"),
    ]
    labels = {"b": (Kind.FACT, Category.TECHNICAL_SKILLS)}
    groups = group_entries(entries, labels, window=timedelta(hours=24), max_size=20)
    as_ids = sorted(tuple(g.message_ids) for g in groups)
    assert as_ids == [("a", "b"), ("c",), ("d",), ("e",)]
    context = next(g for g in groups if g.message_ids == ["e"])
    assert context.scope == Scope.CONTEXT and context.session_id == "s9"
    small = group_entries(entries[:2], labels, window=timedelta(hours=24), max_size=1)
    assert [g.message_ids for g in small] == [["a"], ["b"]]
    # Same turns, same groups, same keys: what a re-run relies on.
    again = group_entries(list(reversed(entries)), labels, window=timedelta(hours=24), max_size=20)
    assert sorted(g.key for g in again) == sorted(g.key for g in groups)
