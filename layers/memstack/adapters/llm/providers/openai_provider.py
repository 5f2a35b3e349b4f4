"""``MEMSTACK_LLM=openai``: extraction and consolidation on an OpenAI-compatible server.

The same prompts, tool schemas, validation, corrected retry and fallback as
Bedrock (``structured.py``); only the transport differs (``openai_chat.py``).
Extraction uses ``MEMSTACK_OPENAI_MODEL``; consolidation uses
``MEMSTACK_OPENAI_SYNTHESIS_MODEL`` when set (a stronger model for the few
synthesis calls), else the same model.
"""

from __future__ import annotations

from typing import Any

from memstack.adapters.llm.providers.openai_chat import OpenAIChat
from memstack.adapters.llm.providers.structured import StructuredExtractor, StructuredSummariser
from memstack.settings import Settings


def openai_chat(settings: Settings, model: str, client: Any | None = None) -> OpenAIChat:
    key = settings.openai.api_key.get_secret_value() if settings.openai.api_key else None
    return OpenAIChat(
        settings.openai.base_url,
        model,
        api_key=key,
        mode=settings.openai.structured_output,
        temperature=settings.openai.temperature,
        timeout=settings.openai.timeout_seconds,
        client=client,
    )


def openai_extractor(settings: Settings, client: Any | None = None) -> StructuredExtractor:
    chat = openai_chat(settings, settings.openai.model, client)
    return StructuredExtractor(
        chat, name="openai", max_tokens=settings.openai.max_tokens, metrics=chat.metrics
    )


def openai_summariser(settings: Settings, client: Any | None = None) -> StructuredSummariser:
    chat = openai_chat(settings, settings.openai.synthesis_model or settings.openai.model, client)
    return StructuredSummariser(chat, name="openai", metrics=chat.metrics)
