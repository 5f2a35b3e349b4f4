"""The Bedrock extractor: context-aware ADD / UPDATE / DELETE / NONE from a model, as validated data.

The model answers through a tool (``record_memory_operations``) whose input
schema is the operation list, so nothing is parsed out of prose. The answer is
validated with pydantic (ops, kinds, categories, and that UPDATE/DELETE name a
memory that was shown). A malformed answer is sent back once with the
validation error as the tool result; if the retry is malformed too, the fact
is kept anyway as an ADD of the raw message (categorised by the lexicon), so
nothing the user said is dropped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memstack.adapters.llm.bedrock_converse import (
    Tool,
    bedrock_runtime_client,
    converse_tool_call,
    default_metrics,
)
from memstack.adapters.llm.lexicon import categorise
from memstack.models import Category, Kind, MemoryRecord, Message, Role
from memstack.ports.llm import ExtractionOp
from memstack.settings import Settings

logger = Logger(service="memstack", child=True)

SYSTEM_PROMPT = """You maintain the long-term memory of an AI assistant about one user.
You receive one new message from the conversation (with its speaker and time), the turns just
before it, and the existing memories most similar to it (each with an id).
Decide what the new message changes, and answer only by calling the tool:
- ADD: a new, durable fact, event or preference about the user (or people and things in their
  life). Write it as a short third-person sentence that names the user, with absolute dates
  (never "yesterday" or "next month": use the message time).
- UPDATE: an existing memory is no longer accurate because the message gives a new value for the
  same thing (moved city, new job, changed preference). Give its target_id and the full new text.
- DELETE: the message says an existing memory is no longer true ("I don't have a dog anymore").
- NONE: the message restates what a memory already says, or holds nothing worth remembering
  (greetings, thanks, questions).
Each ADD/UPDATE has a kind (fact, event, preference), one category, and an event_time
(ISO 8601) when it is about something that happens at a particular time.
Return an empty list when nothing should change."""

TOOL = Tool(
    name="record_memory_operations",
    description="Record the memory operations the new message implies.",
    schema={
        "type": "object",
        "properties": {
            "operations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "op": {"type": "string", "enum": ["ADD", "UPDATE", "DELETE", "NONE"]},
                        "target_id": {
                            "type": "string",
                            "description": "id of the memory UPDATE/DELETE act on",
                        },
                        "content": {"type": "string", "description": "memory text for ADD/UPDATE"},
                        "kind": {"type": "string", "enum": [k.value for k in Kind]},
                        "category": {"type": "string", "enum": [c.value for c in Category]},
                        "event_time": {"type": "string", "description": "ISO 8601 date or time, if any"},
                    },
                    "required": ["op"],
                },
            }
        },
        "required": ["operations"],
    },
)


class _Op(BaseModel):
    """One operation as the model must give it."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["ADD", "UPDATE", "DELETE", "NONE"]
    target_id: str | None = None
    content: str | None = Field(default=None, max_length=2000)
    kind: Kind = Kind.FACT
    category: Category | None = None
    event_time: datetime | None = None

    @field_validator("event_time", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        if value in (None, ""):
            return None
        from memstack.domain.extraction.timeparse import parse_timestamp

        return parse_timestamp(value)

    @model_validator(mode="after")
    def _complete(self) -> _Op:
        if self.op in ("ADD", "UPDATE") and not (self.content or "").strip():
            raise ValueError(f"{self.op} needs a non-empty content")
        if self.op in ("UPDATE", "DELETE") and not self.target_id:
            raise ValueError(f"{self.op} needs the target_id of an existing memory")
        return self


class _Answer(BaseModel):
    operations: list[_Op]


def render_request(message: Message, context: list[Message], neighbours: list[MemoryRecord]) -> str:
    """The user turn sent to the model: JSON, so ids and times are unambiguous."""

    def turn(m: Message) -> dict[str, Any]:
        return {
            "speaker": m.speaker or str(m.role),
            "role": str(m.role),
            "time": m.timestamp.isoformat() if m.timestamp else None,
            "text": m.content,
        }

    memories = [
        {
            "id": n.id,
            "text": n.content,
            "kind": str(n.kind),
            "category": str(n.category or ""),
            "event_time": n.event_time.isoformat() if n.event_time else None,
        }
        for n in neighbours
    ]
    body = {
        "new_message": turn(message),
        "previous_turns": [turn(m) for m in context],
        "existing_memories": memories,
    }
    return json.dumps(body, ensure_ascii=False, indent=1)


class BedrockExtractor:
    name = "bedrock"

    def __init__(
        self,
        model_id: str,
        *,
        client: Any | None = None,
        region: str | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        metrics: Metrics | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model_id = model_id
        self.region = region
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.metrics = metrics if metrics is not None else default_metrics()
        self.sleep = sleep
        self._client = client

    @classmethod
    def from_settings(cls, settings: Settings, client: Any | None = None) -> BedrockExtractor:
        return cls(
            settings.bedrock_extraction_model,
            client=client,
            region=settings.aws_region,
            max_tokens=settings.bedrock_max_tokens,
            temperature=settings.bedrock_temperature,
        )

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = bedrock_runtime_client(self.region)
        return self._client

    def _call(self, messages: list[dict[str, Any]]) -> Any:
        return converse_tool_call(
            self.client,
            model_id=self.model_id,
            system=SYSTEM_PROMPT,
            messages=messages,
            tool=TOOL,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            metrics=self.metrics,
            metric_prefix="Extraction",
            sleep=self.sleep,
        )

    @staticmethod
    def _validate(payload: dict[str, Any] | None, message: Message, known: set[str]) -> list[ExtractionOp]:
        if payload is None:
            raise ValueError(f"the answer must be a call of the {TOOL.name} tool")
        answer = _Answer.model_validate(payload)
        ops = []
        for i, op in enumerate(answer.operations):
            if op.op in ("UPDATE", "DELETE") and op.target_id not in known:
                raise ValueError(
                    f"operations[{i}].target_id {op.target_id!r} is not one of the existing memories"
                )
            ops.append(
                ExtractionOp(
                    op=op.op,
                    target_id=op.target_id,
                    content=op.content,
                    kind=op.kind,
                    category=op.category,
                    event_time=op.event_time,
                    source_ids=[message.id],
                )
            )
        return ops

    def extract(
        self, message: Message, context: list[Message], neighbours: list[MemoryRecord]
    ) -> list[ExtractionOp]:
        if message.role != Role.USER:
            return []  # memories are about the user; assistant turns are context only
        known = {n.id for n in neighbours}
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"text": render_request(message, context, neighbours)}]}
        ]
        call = self._call(messages)
        try:
            return self._validate(call.input, message, known)
        except (ValidationError, ValueError) as exc:
            error = str(exc)
        # One retry, telling the model exactly what was wrong.
        feedback = f"Invalid input: {error}\nCall {TOOL.name} again with corrected input."
        reply: dict[str, Any]
        if call.tool_use_id:
            reply = {
                "toolResult": {
                    "toolUseId": call.tool_use_id,
                    "content": [{"text": feedback}],
                    "status": "error",
                }
            }
        else:
            reply = {"text": feedback}
        messages += [
            call.message or {"role": "assistant", "content": [{"text": "(no tool call)"}]},
            {"role": "user", "content": [reply]},
        ]
        retry = self._call(messages)
        try:
            return self._validate(retry.input, message, known)
        except (ValidationError, ValueError) as exc:
            # The error text quotes the model's answer (memory content): log only where it was wrong.
            logger.warning(
                {"event": "extraction_fallback", "message_id": message.id, "error": _error_shape(exc)}
            )
            self.metrics.add_metric(name="ExtractionFallbacks", unit=MetricUnit.Count, value=1)
        return [
            ExtractionOp(
                op="ADD",
                content=message.content,
                kind=Kind.FACT,
                category=categorise(message.content) or Category.PERSONAL_DETAILS,
                source_ids=[message.id],
            )
        ]


def _error_shape(exc: Exception) -> dict[str, Any]:
    """What was wrong with a tool call, without any of its values: the type, and fields for pydantic."""
    shape: dict[str, Any] = {"type": type(exc).__name__}
    if isinstance(exc, ValidationError):
        shape["fields"] = [
            {"loc": ".".join(str(p) for p in e["loc"]), "type": e["type"]} for e in exc.errors()[:20]
        ]
    return shape
