"""Structured output from any chat model: one tool the model must call, whatever the provider.

A ``Tool`` is a name, a description and a JSON schema; each provider renders
it its own way (Bedrock Converse ``toolConfig``, an OpenAI ``tools`` entry, or
an OpenAI ``response_format`` JSON schema). A ``ToolChat`` is one provider's
conversation: ``ask`` starts it, ``correct`` sends the validation error of the
last answer back and asks again. ``structured.py`` builds the extractor and
the summariser on that port, so every provider validates, retries and falls
back the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

NAMESPACE = "memstack"
CACHE_POINT = {"cachePoint": {"type": "default"}}

_metrics: Metrics | None = None


def default_metrics() -> Metrics:
    """The process's Powertools metrics (created on first use; they share one metric set)."""
    global _metrics
    if _metrics is None:
        _metrics = Metrics(namespace=NAMESPACE)
    return _metrics


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    #: JSON schema of the tool's input
    schema: dict[str, Any]

    def config(self, cache: bool = False) -> dict[str, Any]:
        """Converse ``toolConfig``, the tool forced; ``cache`` adds a cache point after the schema."""
        spec = {
            "toolSpec": {
                "name": self.name,
                "description": self.description,
                "inputSchema": {"json": self.schema},
            }
        }
        return {
            "tools": [spec, CACHE_POINT] if cache else [spec],
            "toolChoice": {"tool": {"name": self.name}},
        }

    def openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.schema},
        }

    def openai_choice(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name}}

    def openai_response_format(self) -> dict[str, Any]:
        return {"type": "json_schema", "json_schema": {"name": self.name, "schema": self.schema}}


@dataclass
class ToolAnswer:
    """What the model answered: the tool input (``None`` if it gave none) and its token usage."""

    input: dict[str, Any] | None
    usage: dict[str, int]
    stop_reason: str | None = None
    #: why ``input`` is None, when the answer was there but unreadable (sent back on a retry)
    problem: str | None = None
    #: the provider's conversation so far, ending with the model's answer (a retry continues it)
    conversation: list[dict[str, Any]] = field(default_factory=list)
    #: the provider's id of the tool call, to address the error to it
    call_id: str | None = None


class ToolChat(Protocol):
    #: human-readable provider name for errors ("Bedrock", "the OpenAI-compatible server")
    provider: str
    #: model requests made so far (retries included)
    calls: int

    def ask(
        self, system: str, prompt: str, tool: Tool, max_tokens: int, metric_prefix: str
    ) -> ToolAnswer: ...

    def correct(
        self, system: str, answer: ToolAnswer, feedback: str, tool: Tool, max_tokens: int, metric_prefix: str
    ) -> ToolAnswer: ...


def record_usage(metrics: Metrics | None, prefix: str, usage: dict[str, int]) -> None:
    """Token counts of one call as metrics: input, output, and the input read from / written to a cache."""
    if metrics is None:
        return
    for key, name in (
        ("inputTokens", "InputTokens"),
        ("outputTokens", "OutputTokens"),
        ("cacheReadInputTokens", "CachedInputTokens"),
        ("cacheWriteInputTokens", "CacheWriteInputTokens"),
    ):
        if key in usage or key in ("inputTokens", "outputTokens"):
            metrics.add_metric(name=f"{prefix}{name}", unit=MetricUnit.Count, value=usage.get(key, 0))
    metrics.add_metric(name=f"{prefix}Calls", unit=MetricUnit.Count, value=1)
