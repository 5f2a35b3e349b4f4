"""One Bedrock Converse call that must answer through one tool: structured output, never free text.

``toolChoice`` forces the named tool, so the answer is the tool's input (JSON
that follows the tool's schema), not prose to parse. Input, output and cached
token counts of every call are emitted as Powertools metrics (namespace
"memstack"); the Lambda handler's ``log_metrics`` flushes them.

Prompt caching: with ``cache`` the request carries a cache point after the
fixed system prompt and one after the tool schema, so repeated extraction and
consolidation calls read that prefix from Bedrock's cache (billed at a
fraction of input tokens) instead of paying for it on every message; the
usage's ``cacheReadInputTokens`` / ``cacheWriteInputTokens`` become the
``...CachedInputTokens`` / ``...CacheWriteInputTokens`` metrics. Not every
model supports cache points (Bedrock rejects such a request), and each
model caches only a prefix of at least its minimum (``CACHE_MINIMUM_TOKENS``),
so ``MEMSTACK_BEDROCK_PROMPT_CACHE=auto`` (the default) sends them only where
both hold (``prompt_cache_enabled``).

Throttling: the default client retries in adaptive mode (client-side rate
limiting, botocore config). Throttling that outlasts those retries is tried
again here a few times with a longer backoff before it becomes
``DependencyFailed``; this outer loop is also what the Stubber tests exercise
(stubbed responses bypass botocore's own retry handler).

``ConverseChat`` is the ``ToolChat`` of ``structured.py`` (the Bedrock
extractor and summariser).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Metrics
from botocore.exceptions import BotoCoreError, ClientError

from memstack.adapters.llm.providers.tools import (
    CACHE_POINT,
    NAMESPACE,
    Tool,
    ToolAnswer,
    default_metrics,
    record_usage,
)
from memstack.errors import DependencyFailed, Throttled

__all__ = [
    "CACHE_MINIMUM_TOKENS",
    "CACHING_MODELS",
    "NAMESPACE",
    "THROTTLING_CODES",
    "ConverseChat",
    "Tool",
    "ToolCall",
    "bedrock_runtime_client",
    "cache_minimum_tokens",
    "converse_tool",
    "converse_tool_call",
    "default_metrics",
    "prefix_tokens",
    "prompt_cache_enabled",
]

THROTTLING_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "ModelNotReadyException",
    }
)
#: the answer of one call (kept under its first name for callers of ``converse_tool_call``)
ToolCall = ToolAnswer
#: Bedrock's minimum prefix, in tokens, for a cache checkpoint to be written, by model family (the
#: "Prompt caching" supported-models table of the Bedrock user guide; longest match first). A shorter
#: prefix is silently not cached: the request is accepted and billed in full, the cache point is noise.
CACHE_MINIMUM_TOKENS = {
    "anthropic.claude-3-5-haiku": 2048,
    "anthropic.claude-3-7-sonnet": 1024,
    "anthropic.claude-sonnet-4": 1024,  # Sonnet 4 and 4.5
    "anthropic.claude-opus-4-5": 4096,
    "anthropic.claude-opus-4": 1024,  # Opus 4 and 4.1
    "anthropic.claude-haiku-4-5": 4096,
    "amazon.nova-": 1000,
}
#: the model families that take Converse cache points at all (others reject a request carrying one)
CACHING_MODELS = tuple(CACHE_MINIMUM_TOKENS)


def _base_model(model_id: str) -> str:
    base = model_id.split("/")[-1]
    for region in ("us.", "eu.", "apac.", "global.", "jp.", "au.", "ca.", "us-gov."):
        base = base.removeprefix(region)  # cross-region inference profiles name the model after a prefix
    return base


def cache_minimum_tokens(model_id: str) -> int | None:
    """The model's minimum cacheable prefix, or None when it takes no cache points."""
    base = _base_model(model_id)
    matches = [family for family in CACHE_MINIMUM_TOKENS if base.startswith(family)]
    return CACHE_MINIMUM_TOKENS[max(matches, key=len)] if matches else None


def prefix_tokens(system: str, *tools: Tool) -> int:
    """A low estimate of the fixed prefix's tokens (a tool's schema, then the system prompt).

    With several tools (one per kind of call), the shortest prefix: every call must qualify.
    Four characters a token, fewer than Claude's tokenizer makes of English and JSON, so a prefix
    judged long enough is long enough; a borderline one goes uncached rather than claimed.
    """
    import json

    schema = min((len(json.dumps(t.config(cache=False))) for t in tools), default=0)
    return (len(system) + schema) // 4


def prompt_cache_enabled(setting: str, model_id: str, fixed_prefix_tokens: int) -> bool:
    """``MEMSTACK_BEDROCK_PROMPT_CACHE``: true, false, or auto.

    auto: on only where it pays, for a model that takes cache points and a fixed prefix at or
    above that model's minimum (Claude Haiku 4.5's is 4,096 tokens: the ~1,100-token extraction
    prefix is never cached there, so auto sends no cache points to it).
    """
    if setting != "auto":
        return setting == "true"
    minimum = cache_minimum_tokens(model_id)
    return minimum is not None and fixed_prefix_tokens >= minimum


def bedrock_runtime_client(region: str | None = None) -> Any:
    """A bedrock-runtime client with adaptive retries (client-side rate limiting on throttling)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name=region,
        config=Config(retries={"mode": "adaptive", "max_attempts": 6}, read_timeout=60, connect_timeout=5),
    )


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
    cache: bool = False,
) -> ToolAnswer:
    """Call Converse with ``tool`` forced; retry sustained throttling; count tokens."""
    request = {
        "modelId": model_id,
        "system": [{"text": system}, CACHE_POINT] if cache else [{"text": system}],
        "messages": messages,
        "toolConfig": tool.config(cache=cache),
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
                raise Throttled(f"Bedrock throttled {model_id} after retries; try again shortly") from exc
            raise DependencyFailed(f"Bedrock {model_id} failed: {code or exc}") from exc
        except BotoCoreError as exc:
            raise DependencyFailed(f"Bedrock {model_id} failed: {exc}") from exc
    usage = {k: int(v) for k, v in (response.get("usage") or {}).items() if isinstance(v, int | float)}
    record_usage(metrics, metric_prefix, usage)
    message = (response.get("output") or {}).get("message") or {}
    conversation = [*messages, message or {"role": "assistant", "content": [{"text": "(no answer)"}]}]
    stop = response.get("stopReason")
    for block in message.get("content") or []:
        use = block.get("toolUse")
        if use and use.get("name") == tool.name:
            payload = use.get("input")
            return ToolAnswer(
                input=payload if isinstance(payload, dict) else None,
                usage=usage,
                stop_reason=stop,
                conversation=conversation,
                call_id=use.get("toolUseId"),
            )
    return ToolAnswer(input=None, usage=usage, stop_reason=stop, conversation=conversation)


def converse_tool(client: Any, **kwargs: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """(tool input, usage) of one forced tool call; an empty dict when the model did not call the tool."""
    call = converse_tool_call(client, **kwargs)
    return call.input or {}, call.usage


class ConverseChat:
    """``ToolChat`` on Bedrock Converse; the client is created on first use unless one is passed."""

    provider = "Bedrock"

    def __init__(
        self,
        model_id: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        temperature: float = 0.0,
        metrics: Metrics | None = None,
        sleep: Callable[[float], None] = time.sleep,
        cache: bool = True,
    ) -> None:
        self.model_id = model_id
        self.region = region
        self.temperature = temperature
        self.metrics = metrics if metrics is not None else default_metrics()
        self.sleep = sleep
        self.cache = cache
        self.calls = 0
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = bedrock_runtime_client(self.region)
        return self._client

    def _send(
        self, system: str, messages: list[dict[str, Any]], tool: Tool, max_tokens: int, prefix: str
    ) -> ToolAnswer:
        self.calls += 1
        return converse_tool_call(
            self.client,
            model_id=self.model_id,
            system=system,
            messages=messages,
            tool=tool,
            max_tokens=max_tokens,
            temperature=self.temperature,
            metrics=self.metrics,
            metric_prefix=prefix,
            sleep=self.sleep,
            cache=self.cache,
        )

    def ask(self, system: str, prompt: str, tool: Tool, max_tokens: int, metric_prefix: str) -> ToolAnswer:
        return self._send(
            system, [{"role": "user", "content": [{"text": prompt}]}], tool, max_tokens, metric_prefix
        )

    def correct(
        self, system: str, answer: ToolAnswer, feedback: str, tool: Tool, max_tokens: int, metric_prefix: str
    ) -> ToolAnswer:
        if answer.call_id:
            reply: dict[str, Any] = {
                "toolResult": {
                    "toolUseId": answer.call_id,
                    "content": [{"text": feedback}],
                    "status": "error",
                }
            }
        else:
            reply = {"text": feedback}
        messages = [*answer.conversation, {"role": "user", "content": [reply]}]
        return self._send(system, messages, tool, max_tokens, metric_prefix)
