"""The Bedrock extractor: context-aware ADD / UPDATE / DELETE / NONE from a Converse model.

The prompt, tool schema, validation, corrected retry and fallback are
``structured.StructuredExtractor``'s (shared with the OpenAI-compatible
provider); this module only connects it to Bedrock Converse, with cache
points after the fixed system prompt and tool schema where the model caches
a prefix that long (``bedrock_converse.prompt_cache_enabled``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Metrics

from memstack.adapters.llm.providers.bedrock_converse import ConverseChat, prefix_tokens, prompt_cache_enabled
from memstack.adapters.llm.providers.structured import EXTRACTION_PROMPT, EXTRACTION_TOOL, StructuredExtractor
from memstack.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.ports.embedder import Embedder

SYSTEM_PROMPT = EXTRACTION_PROMPT
TOOL = EXTRACTION_TOOL


class BedrockExtractor(StructuredExtractor):
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
        prompt_cache: bool = True,
        timezone: str = "UTC",
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
        super().__init__(chat, name="bedrock", max_tokens=max_tokens, metrics=chat.metrics, timezone=timezone)
        self.converse = chat
        self.model_id = model_id

    @classmethod
    def from_settings(cls, settings: Settings, client: Any | None = None) -> BedrockExtractor:
        return cls(
            settings.bedrock.extraction_model,
            client=client,
            region=settings.aws.aws_region,
            max_tokens=settings.bedrock.max_tokens,
            temperature=settings.bedrock.temperature,
            prompt_cache=prompt_cache_enabled(
                settings.bedrock.prompt_cache,
                settings.bedrock.extraction_model,
                prefix_tokens(SYSTEM_PROMPT, TOOL),
            ),
            timezone=settings.timezone,
        )

    @property
    def client(self) -> Any:
        return self.converse.client


def build(settings: Settings, clients: Mapping[str, Any], embedder: Embedder | None) -> BedrockExtractor:
    """``MEMSTACK_LLM=bedrock``; ``clients["bedrock_runtime"]`` when given (``factory.EXTRACTORS``)."""
    return BedrockExtractor.from_settings(settings, clients.get("bedrock_runtime"))
