"""The Bedrock summariser: consolidation's summaries and syntheses from a Converse model.

The prompts and tools are ``structured.StructuredSummariser``'s (shared with the
OpenAI-compatible provider). The synthesis model is configured apart from the
extraction model (``MEMSTACK_BEDROCK_SYNTHESIS_MODEL``: a stronger model for
the few synthesis calls, a light one for the many extraction calls).

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
from typing import TYPE_CHECKING, Any

from memstack.adapters.llm.providers.bedrock_converse import ConverseChat
from memstack.adapters.llm.providers.structured import (
    SUMMARY_PROMPT,
    SUMMARY_TOOL,
    SYNTHESIS_TOOL,
    StructuredSummariser,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

SYSTEM = SUMMARY_PROMPT
__all__ = ["SUMMARY_TOOL", "SYNTHESIS_TOOL", "SYSTEM", "BedrockSummariser"]


class BedrockSummariser(StructuredSummariser):
    def __init__(
        self,
        model_id: str,
        *,
        client: Any = None,
        region: str | None = None,
        temperature: float = 0.0,
        metrics: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        prompt_cache: bool = True,
    ) -> None:
        chat = ConverseChat(
            model_id,
            client=client,
            region=region,
            temperature=temperature,
            metrics=metrics,
            sleep=sleep,
            cache=prompt_cache,
        )
        super().__init__(chat, name="bedrock-converse", metrics=chat.metrics)
        self.model_id = model_id


def build(settings: Settings, clients: Mapping[str, Any]) -> BedrockSummariser:
    """``MEMSTACK_LLM=bedrock``; ``clients["bedrock_runtime"]`` when given (``factory.SUMMARISERS``)."""
    from memstack.adapters.llm.providers.bedrock_converse import prefix_tokens, prompt_cache_enabled

    return BedrockSummariser(
        settings.bedrock.synthesis_model,
        client=clients.get("bedrock_runtime"),
        region=settings.aws.aws_region,
        temperature=settings.bedrock.temperature,
        prompt_cache=prompt_cache_enabled(
            settings.bedrock.prompt_cache,
            settings.bedrock.synthesis_model,
            prefix_tokens(SYSTEM, SUMMARY_TOOL, SYNTHESIS_TOOL),
        ),
    )
