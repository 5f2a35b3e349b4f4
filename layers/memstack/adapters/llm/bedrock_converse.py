"""One Bedrock Converse call that must answer through one tool: structured output, never free text.

``toolChoice`` forces the named tool, so the answer is the tool's input (JSON
that follows the tool's schema), not prose to parse. Input and output token
counts of every call are emitted as Powertools metrics (namespace
"memstack"); the Lambda handler's ``log_metrics`` flushes them.

Throttling: the default client retries in adaptive mode (client-side rate
limiting, botocore config). Throttling that outlasts those retries is tried
again here a few times with a longer backoff before it becomes
``DependencyFailed``; this outer loop is also what the Stubber tests exercise
(stubbed responses bypass botocore's own retry handler).

Used by the Bedrock extractor and by consolidation's Bedrock summariser.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import BotoCoreError, ClientError

from memstack.errors import DependencyFailed

NAMESPACE = "memstack"
THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "ModelNotReadyException",
    }
)

_metrics: Metrics | None = None


def default_metrics() -> Metrics:
    """The process's Powertools metrics (created on first use; they share one metric set)."""
    global _metrics
    if _metrics is None:
        _metrics = Metrics(namespace=NAMESPACE)
    return _metrics


def bedrock_runtime_client(region: str | None = None) -> Any:
    """A bedrock-runtime client with adaptive retries (client-side rate limiting on throttling)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name=region,
        config=Config(retries={"mode": "adaptive", "max_attempts": 6}, read_timeout=60, connect_timeout=5),
    )


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    #: JSON schema of the tool's input
    schema: dict[str, Any]

    def config(self) -> dict[str, Any]:
        return {
            "tools": [
                {
                    "toolSpec": {
                        "name": self.name,
                        "description": self.description,
                        "inputSchema": {"json": self.schema},
                    }
                }
            ],
            "toolChoice": {"tool": {"name": self.name}},
        }


@dataclass
class ToolCall:
    """What the model answered: the tool input (``None`` if it did not call the tool) and its usage."""

    input: dict[str, Any] | None
    tool_use_id: str | None
    usage: dict[str, int]
    #: the assistant message as returned, to continue the conversation (a retry)
    message: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None


def _record_usage(metrics: Metrics | None, prefix: str, usage: dict[str, int]) -> None:
    if metrics is None:
        return
    metrics.add_metric(name=f"{prefix}InputTokens", unit=MetricUnit.Count, value=usage.get("inputTokens", 0))
    metrics.add_metric(
        name=f"{prefix}OutputTokens", unit=MetricUnit.Count, value=usage.get("outputTokens", 0)
    )
    metrics.add_metric(name=f"{prefix}Calls", unit=MetricUnit.Count, value=1)


def converse_tool_call(
    client: Any,
    *,
    model_id: str,
    system: str,
    messages: list[dict[str, Any]],
    tool: Tool,
    max_tokens: int,
    temperature: float,
    metrics: Metrics | None = None,
    metric_prefix: str = "Bedrock",
    throttle_retries: int = 2,
    backoff_seconds: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> ToolCall:
    """Call Converse with ``tool`` forced; retry sustained throttling; count tokens."""
    request = {
        "modelId": model_id,
        "system": [{"text": system}],
        "messages": messages,
        "toolConfig": tool.config(),
        "inferenceConfig": {"maxTokens": max_tokens, "temperature": temperature},
    }
    for attempt in range(throttle_retries + 1):
        try:
            response = client.converse(**request)
            break
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in THROTTLING_CODES and attempt < throttle_retries:
                sleep(backoff_seconds * (2**attempt))
                continue
            if code in THROTTLING_CODES:
                raise DependencyFailed(
                    f"Bedrock throttled {model_id} after retries; try again shortly"
                ) from exc
            raise DependencyFailed(f"Bedrock {model_id} failed: {code or exc}") from exc
        except BotoCoreError as exc:
            raise DependencyFailed(f"Bedrock {model_id} failed: {exc}") from exc
    usage = {k: int(v) for k, v in (response.get("usage") or {}).items() if isinstance(v, int | float)}
    _record_usage(metrics, metric_prefix, usage)
    message = (response.get("output") or {}).get("message") or {}
    for block in message.get("content") or []:
        use = block.get("toolUse")
        if use and use.get("name") == tool.name:
            payload = use.get("input")
            return ToolCall(
                input=payload if isinstance(payload, dict) else None,
                tool_use_id=use.get("toolUseId"),
                usage=usage,
                message=message,
                stop_reason=response.get("stopReason"),
            )
    return ToolCall(
        input=None, tool_use_id=None, usage=usage, message=message, stop_reason=response.get("stopReason")
    )


def converse_tool(client: Any, **kwargs: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """(tool input, usage) of one forced tool call; an empty dict when the model did not call the tool."""
    call = converse_tool_call(client, **kwargs)
    return call.input or {}, call.usage
