"""The model-backed extractor and summariser, on any ``ToolChat`` (Bedrock Converse, OpenAI-compatible).

Extraction: the model answers through a tool (``record_memory_operations``)
whose input schema is the operation list, so nothing is parsed out of prose.
The answer is validated with pydantic (ops, kinds, categories, and that
UPDATE/DELETE/CONFLICT name a memory that was shown). A malformed answer is sent back
once with the validation error; if the retry is malformed too, the fact is
kept anyway as an ADD of the raw message (categorised by the lexicon), so
nothing the user said is dropped.

Summaries: ``summarise`` asks for one summary of a group of turns;
``synthesise`` for the few higher-level statements a set of related summaries
and existing memories support. Both are bounded twice: the token budget in
the request (plus room for the JSON around the text), and the returned text
trimmed to it. A malformed answer is sent back once with what was wrong; a
second one falls back to the offline extractive summariser, so consolidation
still folds the turns in (``ConsolidationFallbacks`` counts it).

The system prompts and tool schemas are fixed strings, first in every
request, so a provider with prompt caching (Bedrock cache points, OpenAI's
automatic prefix cache) reads them from cache after the first call. A
tenant's guidance (``ports.llm.Guidance``: its own categories, its
instructions) changes them for that tenant only: the categories' names are
the tool schema's ``category`` enum, their descriptions and the instructions
follow the fixed prompt (``extraction_system``), so each tenant's prefix is
as fixed as the default one.
"""

from __future__ import annotations

import json
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memstack.adapters.llm.providers.tools import Tool, ToolAnswer, ToolChat, default_metrics
from memstack.adapters.llm.rules.extractive_summariser import ExtractiveSummariser, estimate_tokens, truncate
from memstack.domain.categories import lexicon_for
from memstack.models import BUILT_IN_CATEGORIES, Kind, MemoryRecord, Message, Role
from memstack.ports.llm import DEFAULT_GUIDANCE, ExtractionOp, Guidance

logger = Logger(service="memstack", child=True)

EXTRACTION_PROMPT = """You maintain the long-term memory of an AI assistant about one user.
You receive one new message from the conversation (with its speaker and time), the turns just
before it, and the existing memories most similar to it (each with an id).
Decide what the new message changes, and answer only by calling the tool:
- ADD: a new, durable fact, event or preference about the user (or people and things in their
  life). Write it as a short third-person sentence that names the user, with absolute dates
  (never "yesterday" or "next month": use the message time).
- UPDATE: an existing memory is no longer accurate because the message gives a new value for the
  same thing (moved city, new job, changed preference, a correction, a plan that changed, a goal
  that was reached). Give its target_id and the full new text.
- DELETE: the message says an existing memory is no longer true ("I don't have a dog anymore",
  "forget that ...").
- CONFLICT: the message contradicts an existing memory and nothing says which is right (no "now",
  "anymore", "actually", no correction, no change over time): "I have never written a Flask route"
  and "I implemented the login route in Flask". Give its target_id and the new statement as
  content; both are kept, linked, so the assistant can ask the user.
- NONE: the message restates what a memory already says, or holds nothing worth remembering
  (greetings, thanks, questions, requests to the assistant, hypotheticals).
Each ADD/UPDATE/CONFLICT has a kind (fact, event, preference), one category, and an event_time
(ISO 8601) when it is about something that happens at a particular time.
Return an empty list when nothing should change.

Examples (memories shown as id: text; the speaker is Kim):
1. "I moved to Osaka last month." with m1: Kim lives in Tokyo.
   -> UPDATE m1 "Kim lives in Osaka." (fact, personal_details, event_time: the month)
2. "Actually I prefer coffee over tea now." with m2: Kim prefers tea over coffee.
   -> UPDATE m2 "Kim prefers coffee over tea." (preference, dietary)
3. "Sorry, I meant Hannah, not Anna." with m3: Kim's sister is called Anna.
   -> UPDATE m3 "Kim's sister is called Hannah." (fact, relationships)
4. "Forget that I like jazz." with m4: Kim likes jazz.  -> DELETE m4
5. "I don't have a car anymore." with m5: Kim owns a red Golf.  -> DELETE m5
6. "I quit smoking in March!" with m6: Kim smokes five cigarettes a day.
   -> UPDATE m6 "Kim quit smoking in March 2024." (event, health)
7. "I finished the Rust book." with m7: Kim is trying to learn Rust.
   -> UPDATE m7 "Kim finished the Rust book." (event, technical_skills)
8. "We cancelled the Mexico trip." with m8: Kim is flying to Mexico in December.
   -> UPDATE m8 "Kim cancelled the December trip to Mexico." (event, travel)
9. "I got a job at a bank, I start Monday." with m9: Kim works for the city council.
   -> UPDATE m9 "Kim works at a bank (started on 12 February 2024)." (fact, professional)
10. "My brother Tim is a nurse in Leeds." with no related memory
   -> ADD "Kim's brother Tim is a nurse in Leeds." (fact, relationships)
11. "I'm moving to Lisbon next year." with m1: Kim lives in Osaka.
   -> ADD "Kim plans to move to Lisbon in 2025." (event, personal_details); m1 stays: not moved yet
12. "I live in Osaka." with m1: Kim lives in Osaka.  -> NONE m1
13. "Thanks! Can you tell me a joke?"  -> [] (small talk and a request)
14. "If I were rich I would buy a boat."  -> [] (a hypothetical, not a fact)
15. "My friend Jake moved to Denver." with m1: Kim lives in Osaka.
   -> ADD "Kim's friend Jake moved to Denver." (event, relationships); m1 is about Kim, not Jake
16. "I've never been to Japan." with m10: Kim ate takoyaki in Osaka in 2019.
   -> CONFLICT m10 "Kim has never been to Japan." (fact, travel); nothing says which is right
Never UPDATE or DELETE a memory the message is not about, and never invent an id."""

#: the decisions the model may take (``ports.llm.OpName``)
OPS = ("ADD", "UPDATE", "DELETE", "NONE", "CONFLICT")
_WRITES = ("ADD", "UPDATE", "CONFLICT")
_TARGETED = ("UPDATE", "DELETE", "CONFLICT")


@lru_cache(maxsize=256)
def extraction_tool(categories: tuple[str, ...] = BUILT_IN_CATEGORIES) -> Tool:
    """The operations tool, its ``category`` one of ``categories`` (the built-in 15, or a tenant's)."""
    return Tool(
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
                            "op": {"type": "string", "enum": list(OPS)},
                            "target_id": {
                                "type": "string",
                                "description": "id of the memory UPDATE/DELETE/CONFLICT act on",
                            },
                            "content": {
                                "type": "string",
                                "description": "memory text for ADD/UPDATE/CONFLICT",
                            },
                            "kind": {"type": "string", "enum": [k.value for k in Kind]},
                            "category": {"type": "string", "enum": list(categories)},
                            "event_time": {"type": "string", "description": "ISO 8601 date or time, if any"},
                        },
                        "required": ["op"],
                    },
                }
            },
            "required": ["operations"],
        },
    )


EXTRACTION_TOOL = extraction_tool()


def extraction_system(guidance: Guidance = DEFAULT_GUIDANCE) -> str:
    """The system prompt for a tenant: the fixed prompt, then its categories and instructions."""
    parts = [EXTRACTION_PROMPT]
    if guidance.custom:
        own = "\n".join(f"- {c.name}: {c.description}" for c in guidance.custom)
        if guidance.built_in:
            parts.append(
                "Besides the categories above, this deployment has its own; file a memory under one of "
                f"them when it fits:\n{own}"
            )
        else:
            parts.append(
                "This deployment does not use the categories of the examples: file every memory under "
                f"exactly one of these:\n{own}"
            )
    if guidance.instructions.strip():
        parts.append(
            "Instructions from the operator of this assistant about what to remember and what to leave "
            "out. Follow them; where they differ from the rules above, they win:\n"
            + guidance.instructions.strip()
        )
    return "\n\n".join(parts)


SUMMARY_PROMPT = (
    "You maintain long-term memory about one user of an AI assistant. Use only what the input says; "
    "write in the third person about the user; keep dates and names exact; never invent facts."
)
SUMMARY_TOOL = Tool(
    name="record_summary",
    description="Record the summary of a batch of conversation turns.",
    schema={
        "type": "object",
        "properties": {"summary": {"type": "string", "description": "what the turns say about the user"}},
        "required": ["summary"],
    },
)
SYNTHESIS_TOOL = Tool(
    name="record_memories",
    description="Record higher-level memories that the summaries and existing memories support together.",
    schema={
        "type": "object",
        "properties": {
            "memories": {
                "type": "array",
                "items": {"type": "string"},
                "maxItems": 5,
                "description": "one self-contained statement each",
            },
        },
        "required": ["memories"],
    },
)


class _Op(BaseModel):
    """One operation as the model must give it."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["ADD", "UPDATE", "DELETE", "NONE", "CONFLICT"]
    target_id: str | None = None
    content: str | None = Field(default=None, max_length=2000)
    kind: Kind = Kind.FACT
    category: str | None = None
    event_time: datetime | None = None

    @field_validator("category", mode="before")
    @classmethod
    def _no_category(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("event_time", mode="before")
    @classmethod
    def _time(cls, value: Any, info: ValidationInfo) -> Any:
        """A time the model wrote without a zone is read in the configured one (``context["timezone"]``)."""
        if value in (None, ""):
            return None
        from memstack.domain.time.parse import parse_timestamp

        return parse_timestamp(value, (info.context or {}).get("timezone"))

    @model_validator(mode="after")
    def _complete(self) -> _Op:
        if self.op in _WRITES and not (self.content or "").strip():
            raise ValueError(f"{self.op} needs a non-empty content")
        if self.op in _TARGETED and not self.target_id:
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


def validate_operations(
    answer: ToolAnswer,
    message: Message,
    known: set[str],
    timezone: str = "UTC",
    categories: tuple[str, ...] = BUILT_IN_CATEGORIES,
) -> list[ExtractionOp]:
    """The answer as operations, or ``ValueError``/``ValidationError`` saying what is wrong with it.

    ``timezone``: the zone of times the model wrote without one (``Settings.timezone``);
    ``categories``: the tenant's, one of which each memory must be filed under.
    """
    if answer.input is None:
        raise ValueError(answer.problem or f"the answer must be a call of the {EXTRACTION_TOOL.name} tool")
    parsed = _Answer.model_validate(answer.input, context={"timezone": timezone})
    ops = []
    for i, op in enumerate(parsed.operations):
        if op.op in _TARGETED and op.target_id not in known:
            raise ValueError(
                f"operations[{i}].target_id {op.target_id!r} is not one of the existing memories"
            )
        if op.category is not None and op.category not in categories:
            raise ValueError(
                f"operations[{i}].category {op.category!r} is not one of: {', '.join(categories)}"
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


class StructuredExtractor:
    """``Extractor`` on a model: a forced tool call, validated, one corrected retry, then a safe fallback."""

    def __init__(
        self,
        chat: ToolChat,
        *,
        name: str,
        max_tokens: int = 1024,
        metrics: Metrics | None = None,
        timezone: str = "UTC",
    ) -> None:
        self.chat = chat
        self.name = name
        self.max_tokens = max_tokens
        self.metrics = metrics if metrics is not None else default_metrics()
        #: the zone of times the model writes without one (``Settings.timezone``)
        self.timezone = timezone

    @property
    def model_calls(self) -> int:
        """Requests made to the model (the evaluation reports them per message)."""
        return self.chat.calls

    def extract(
        self,
        message: Message,
        context: list[Message],
        neighbours: list[MemoryRecord],
        guidance: Guidance = DEFAULT_GUIDANCE,
    ) -> list[ExtractionOp]:
        if message.role != Role.USER:
            return []  # memories are about the user; assistant turns are context only
        known = {n.id for n in neighbours}
        categories = guidance.names
        system, tool = extraction_system(guidance), extraction_tool(categories)
        prompt = render_request(message, context, neighbours)
        answer = self.chat.ask(system, prompt, tool, self.max_tokens, "Extraction")
        try:
            return validate_operations(answer, message, known, self.timezone, categories)
        except (ValidationError, ValueError) as exc:
            error = str(exc)
        # One retry, telling the model exactly what was wrong.
        feedback = f"Invalid input: {error}\nCall {tool.name} again with corrected input."
        retry = self.chat.correct(system, answer, feedback, tool, self.max_tokens, "Extraction")
        try:
            return validate_operations(retry, message, known, self.timezone, categories)
        except (ValidationError, ValueError) as exc:
            logger.warning(
                {"event": "extraction_fallback", "message_id": message.id, "error": type(exc).__name__}
            )
            self.metrics.add_metric(name="ExtractionFallbacks", unit=MetricUnit.Count, value=1)
        lexicon = lexicon_for(guidance)
        return [
            ExtractionOp(
                op="ADD",
                content=message.content,
                kind=Kind.FACT,
                category=lexicon.categorise(message.content) or lexicon.fallback(Kind.FACT),
                source_ids=[message.id],
            )
        ]


# What each summary tool's answer field must be.
SUMMARY_TYPES: dict[str, type] = {"summary": str, "memories": list}
_JSON_ROOM = 64


class StructuredSummariser:
    """``Summariser`` on a model: each answer is one forced tool call, trimmed to its token budget."""

    def __init__(self, chat: ToolChat, *, name: str, metrics: Metrics | None = None) -> None:
        self.chat = chat
        self.name = name
        self.metrics = metrics if metrics is not None else default_metrics()
        #: token usage of every call, summed (tests and logs read it; metrics carry it to CloudWatch)
        self.usage = {"inputTokens": 0, "outputTokens": 0}

    @property
    def model_calls(self) -> int:
        return self.chat.calls

    def _call(self, tool: Tool, prompt: str, max_tokens: int, key: str) -> Any | None:
        """The tool input's ``key``, from the first answer or the corrected retry; None if both were bad."""
        # The budget bounds the text; the JSON around it needs room too, or the answer is cut mid-object.
        room = max_tokens + _JSON_ROOM
        answer = self.chat.ask(SUMMARY_PROMPT, prompt, tool, room, "Consolidation")
        for attempt in range(2):
            for k in self.usage:
                self.usage[k] += int(answer.usage.get(k, 0))
            value = (answer.input or {}).get(key)
            if isinstance(value, SUMMARY_TYPES[key]):
                return value
            if attempt:
                break
            problem = answer.problem or (
                f"the answer must be a call of {tool.name} with {key!r}"
                if answer.input is None
                else f"{key!r} is missing or not a {SUMMARY_TYPES[key].__name__}"
            )
            feedback = f"Invalid input: {problem}\nCall {tool.name} again with corrected input."
            answer = self.chat.correct(SUMMARY_PROMPT, answer, feedback, tool, room, "Consolidation")
        logger.warning(
            {"event": "consolidation_fallback", "tool": tool.name, "stop_reason": answer.stop_reason}
        )
        self.metrics.add_metric(name="ConsolidationFallbacks", unit=MetricUnit.Count, value=1)
        return None

    def summarise(self, texts: list[str], max_tokens: int) -> str:
        turns = "\n".join(f"- {t}" for t in texts)
        prompt = (
            f"Summarise these conversation turns in at most {max_tokens} tokens. Keep every fact, preference "
            f"and event about the user; drop small talk.\n\n{turns}"
        )
        out = self._call(SUMMARY_TOOL, prompt, max_tokens, "summary")
        if out is None:  # the model failed twice: the offline summary keeps the turns anyway
            return ExtractiveSummariser().summarise(texts, max_tokens)
        return truncate(str(out).strip(), max_tokens)

    def synthesise(self, summaries: list[str], existing: list[MemoryRecord], max_tokens: int) -> list[str]:
        known = "\n".join(f"- {r.content}" for r in existing if not r.deleted) or "- (none)"
        new = "\n".join(f"- {s}" for s in summaries)
        prompt = (
            "New summaries:\n" + new + "\n\nExisting memories:\n" + known + "\n\n"
            f"State the higher-level memories these support together, in at most {max_tokens} tokens in all. "
            "Merge what overlaps; when new information changes an existing memory, state the current truth."
        )
        out = self._call(SYNTHESIS_TOOL, prompt, max_tokens, "memories")
        if out is None:
            return ExtractiveSummariser().synthesise(summaries, existing, max_tokens)
        memories = [str(m).strip() for m in out if str(m).strip()]
        budget, kept = max_tokens, []
        for m in memories:  # the budget bounds all statements together
            text = truncate(m, budget)
            if not text.strip(" …"):
                break
            kept.append(text)
            budget -= estimate_tokens(text)
        return kept
