"""The Bedrock summariser: Converse with one forced tool, so answers are structured data, not prose.

``summarise`` asks for one summary of a group of turns; ``synthesise`` for the
few higher-level statements a set of related summaries and existing memories
support ("an ML practitioner who mainly uses PyTorch"). Both are bounded twice:
``maxTokens`` in the request, and the returned text trimmed to the budget.
The call itself is ``bedrock_converse.converse_tool_call`` (shared with the
extractor): throttling retries, and token counts as Powertools metrics.

Batch inference seam: a run with many groups can submit all ``summarise``
prompts as one Bedrock batch job (``CreateModelInvocationJob``, JSONL in S3,
about half the on-demand price) instead of one Converse call each. The
consolidation job is resumable per group (see domain/consolidation/job.py), so
a batch summariser returns the finished groups and the job's next run picks up
the rest. The prompts are built in ``summarise`` and ``synthesise`` only, so a
batch summariser reuses them as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from memstack.adapters.llm.bedrock_converse import (
    Tool,
    bedrock_runtime_client,
    converse_tool_call,
    default_metrics,
)
from memstack.adapters.llm.extractive_summariser import estimate_tokens, truncate
from memstack.errors import DependencyFailed
from memstack.models import MemoryRecord

SYSTEM = (
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


class BedrockSummariser:
    name = "bedrock-converse"

    def __init__(
        self,
        model_id: str,
        *,
        client: Any = None,
        region: str | None = None,
        temperature: float = 0.0,
        metrics: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model_id = model_id
        self.temperature = temperature
        self._client = client
        self._region = region
        self.metrics = metrics if metrics is not None else default_metrics()
        self._sleep = sleep
        #: token usage of every call, summed (tests and logs read it; metrics carry it to CloudWatch)
        self.usage = {"inputTokens": 0, "outputTokens": 0}

    @property
    def client(self) -> Any:
        if self._client is None:  # created on first use, with adaptive retries
            self._client = bedrock_runtime_client(self._region)
        return self._client

    def _call(self, tool: Tool, prompt: str, max_tokens: int) -> dict[str, Any]:
        call = converse_tool_call(
            self.client,
            model_id=self.model_id,
            system=SYSTEM,
            messages=[{"role": "user", "content": [{"text": prompt}]}],
            tool=tool,
            max_tokens=max_tokens,
            temperature=self.temperature,
            metrics=self.metrics,
            metric_prefix="Consolidation",
            sleep=self._sleep,
        )
        for key in self.usage:
            self.usage[key] += int(call.usage.get(key, 0))
        if call.input is None:
            raise DependencyFailed(
                f"Bedrock answered without calling {tool.name} (stopReason={call.stop_reason})"
            )
        return call.input

    def summarise(self, texts: list[str], max_tokens: int) -> str:
        turns = "\n".join(f"- {t}" for t in texts)
        prompt = (
            f"Summarise these conversation turns in at most {max_tokens} tokens. Keep every fact, preference "
            f"and event about the user; drop small talk.\n\n{turns}"
        )
        out = self._call(SUMMARY_TOOL, prompt, max_tokens)
        return truncate(str(out.get("summary", "")).strip(), max_tokens)

    def synthesise(self, summaries: list[str], existing: list[MemoryRecord], max_tokens: int) -> list[str]:
        known = "\n".join(f"- {r.content}" for r in existing if not r.deleted) or "- (none)"
        new = "\n".join(f"- {s}" for s in summaries)
        prompt = (
            "New summaries:\n" + new + "\n\nExisting memories:\n" + known + "\n\n"
            f"State the higher-level memories these support together, in at most {max_tokens} tokens in all. "
            "Merge what overlaps; when new information changes an existing memory, state the current truth."
        )
        out = self._call(SYNTHESIS_TOOL, prompt, max_tokens)
        memories = [str(m).strip() for m in out.get("memories", []) if str(m).strip()]
        budget, kept = max_tokens, []
        for m in memories:  # the budget bounds all statements together
            text = truncate(m, budget)
            if not text.strip(" …"):
                break
            kept.append(text)
            budget -= estimate_tokens(text)
        return kept
