"""``ToolChat`` on an OpenAI-compatible ``/v1/chat/completions`` server.

OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio: anything that speaks the chat API.

Structured output, in one of two ways the server may support:

- ``tools``: the tool as a function, forced with ``tool_choice``; the answer is
  the call's ``arguments`` (a JSON string);
- ``json_schema``: ``response_format`` with the tool's schema; the answer is
  the message content (a JSON object). OpenAI, vLLM and llama.cpp's own server
  take ``{"type": "json_schema", "json_schema": {...}}``; llama-cpp-python's
  server takes only ``{"type": "json_object", "schema": {...}}`` (and says so
  with an HTTP 500 naming ``response_format``), so a refusal of the first form
  switches to the second for the rest of the process.

``auto`` (the default) starts with tools and switches to ``json_schema``, for
the rest of the process, when the server refuses tools (an HTTP 400/422/501
naming tools, as servers without function calling answer). A retry after a
malformed answer continues the conversation with the error addressed to the
tool call (a ``tool`` message) or, in JSON mode, as a user message.

Why httpx rather than the ``openai`` package: this is one POST per call, and
httpx is already what the rest of the stack uses; the ``openai`` client adds
its own retry loop and types for dozens of endpoints we never call, and
several local servers answer in ways its strict parsing rejects. Rate limits
(429) and server errors (5xx, connection failures) are retried here with
backoff, then become ``DependencyFailed``; other errors are not retried.
Token counts (prompt, completion, and ``prompt_tokens_details.cached_tokens``
where the server reports its prefix cache) become the same metrics as
Bedrock's. The API key is sent as a Bearer token and never logged.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx
from aws_lambda_powertools import Logger, Metrics

from memstack.adapters.llm.providers.tools import Tool, ToolAnswer, default_metrics, record_usage
from memstack.errors import DependencyFailed

logger = Logger(service="memstack", child=True)

Mode = Literal["auto", "tools", "json_schema"]
RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
# How a server without function calling says so (llama.cpp, older vLLM, Ollama builds, proxies).
_NO_TOOLS = ("tool", "function")
_REFUSED = frozenset({400, 422, 500, 501})


class OpenAIChat:
    provider = "the OpenAI-compatible server"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        mode: Mode = "auto",
        temperature: float = 0.0,
        timeout: float = 60.0,
        client: httpx.Client | None = None,
        metrics: Metrics | None = None,
        retries: int = 2,
        backoff_seconds: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.mode: Mode = mode
        self.temperature = temperature
        self.timeout = timeout
        self.metrics = metrics if metrics is not None else default_metrics()
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        self.sleep = sleep
        self.calls = 0
        #: which ``response_format`` shape the server takes (see the module docstring)
        self.json_format: Literal["json_schema", "json_object"] = "json_schema"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = client

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        return self._client

    @property
    def structured(self) -> Literal["tools", "json_schema"]:
        """How this chat asks for structured output now (``auto`` starts with tools)."""
        return "json_schema" if self.mode == "json_schema" else "tools"

    # ------------------------------------------------------------------ ToolChat
    def ask(self, system: str, prompt: str, tool: Tool, max_tokens: int, metric_prefix: str) -> ToolAnswer:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        return self._complete(messages, tool, max_tokens, metric_prefix)

    def correct(
        self, system: str, answer: ToolAnswer, feedback: str, tool: Tool, max_tokens: int, metric_prefix: str
    ) -> ToolAnswer:
        if answer.call_id:
            reply = {"role": "tool", "tool_call_id": answer.call_id, "content": feedback}
        else:
            reply = {"role": "user", "content": feedback}
        return self._complete([*answer.conversation, reply], tool, max_tokens, metric_prefix)

    # ------------------------------------------------------------------ one request
    def _body(self, messages: list[dict[str, Any]], tool: Tool, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": max_tokens,
        }
        if self.structured == "tools":
            body["tools"] = [tool.openai_tool()]
            body["tool_choice"] = tool.openai_choice()
        elif self.json_format == "json_schema":
            body["response_format"] = tool.openai_response_format()
        else:
            body["response_format"] = {"type": "json_object", "schema": tool.schema}
        if self.structured == "json_schema":
            # The schema alone does not say what the object is for: name the tool in the prompt too.
            hint = f"Answer with one JSON object, the input of {tool.name}: {tool.description}"
            body["messages"] = [
                *messages[:-1],
                {**messages[-1], "content": f"{messages[-1]['content']}\n\n{hint}"},
            ]
        return body

    def _complete(
        self, messages: list[dict[str, Any]], tool: Tool, max_tokens: int, metric_prefix: str
    ) -> ToolAnswer:
        response = self._post(self._body(messages, tool, max_tokens))
        if self._refuses_tools(response):
            logger.info({"event": "openai_structured_output", "mode": "json_schema", "reason": "no tools"})
            self.mode = "json_schema"
            response = self._post(self._body(messages, tool, max_tokens))
        if self._refuses_json_schema(response):
            logger.info(
                {"event": "openai_structured_output", "mode": "json_object", "reason": "no json_schema"}
            )
            self.json_format = "json_object"
            response = self._post(self._body(messages, tool, max_tokens))
        if response.status_code >= 400:
            raise DependencyFailed(
                f"{self.provider} answered HTTP {response.status_code} for model {self.model}: "
                f"{_error_message(response)}"
            )
        return self._answer(response, messages, tool, metric_prefix)

    def _refuses_tools(self, response: httpx.Response) -> bool:
        """``auto`` mode, and the server answered that it does not do tools."""
        if self.mode != "auto" or response.status_code not in _REFUSED:
            return False
        return any(word in response.text.lower() for word in _NO_TOOLS)

    def _refuses_json_schema(self, response: httpx.Response) -> bool:
        """JSON mode, and the server does not take ``response_format`` type ``json_schema``."""
        if self.structured != "json_schema" or self.json_format != "json_schema":
            return False
        return response.status_code in _REFUSED and "response_format" in response.text

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        for attempt in range(self.retries + 1):
            self.calls += 1
            try:
                response = self.client.post(self.url, json=body, headers=self._headers)
            except httpx.HTTPError as exc:
                if attempt < self.retries:
                    self.sleep(self.backoff_seconds * (2**attempt))
                    continue
                raise DependencyFailed(
                    f"{self.provider} at {self.url} is unreachable: {type(exc).__name__}"
                ) from exc
            if response.status_code in RETRIED_STATUS and attempt < self.retries and not _invalid(response):
                self.sleep(_retry_after(response) or self.backoff_seconds * (2**attempt))
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def _answer(
        self, response: httpx.Response, messages: list[dict[str, Any]], tool: Tool, metric_prefix: str
    ) -> ToolAnswer:
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise DependencyFailed(f"{self.provider} sent an answer that is not a chat completion") from exc
        usage = _usage(data.get("usage") or {})
        record_usage(self.metrics, metric_prefix, usage)
        stop = choice.get("finish_reason")
        said = {"role": "assistant", "content": message.get("content") or ""}
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            if function.get("name") != tool.name:
                continue
            said["tool_calls"] = [call]
            payload, problem = _json_object(function.get("arguments"))
            return ToolAnswer(payload, usage, stop, problem, [*messages, said], call.get("id"))
        # JSON mode, or a server that answered in the content despite the tool.
        payload, problem = _json_object(message.get("content"))
        if payload is None and self.structured == "tools":
            problem = f"the answer must be a call of the {tool.name} tool"
        return ToolAnswer(payload, usage, stop, problem, [*messages, said])


def _json_object(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(raw, dict):
        return raw, None
    if not isinstance(raw, str) or not raw.strip():
        return None, "the answer was empty"
    text = raw.strip()
    if text.startswith("```"):  # some models fence JSON even in JSON mode
        text = text.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"the answer is not valid JSON ({exc.msg} at position {exc.pos})"
    if not isinstance(value, dict):
        return None, "the answer must be a JSON object"
    return value, None


def _usage(raw: dict[str, Any]) -> dict[str, int]:
    usage = {
        "inputTokens": int(raw.get("prompt_tokens") or 0),
        "outputTokens": int(raw.get("completion_tokens") or 0),
    }
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int):
        usage["cacheReadInputTokens"] = cached
    return usage


def _invalid(response: httpx.Response) -> bool:
    """A 500 that is the server rejecting the request (llama-cpp-python's validation errors): no retry."""
    return response.status_code == 500 and "validation error" in response.text.lower()


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return min(float(response.headers.get("retry-after", "")), 30.0)
    except ValueError:
        return None


def _error_message(response: httpx.Response) -> str:
    """The server's own error message (never our request), shortened."""
    try:
        error = response.json().get("error")
        text = error.get("message") if isinstance(error, dict) else str(error or "")
    except (ValueError, AttributeError):
        text = response.reason_phrase
    return (text or response.reason_phrase or "no message")[:300]
