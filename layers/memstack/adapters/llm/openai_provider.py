"""``MEMSTACK_LLM=openai``: extraction and consolidation on an OpenAI-compatible server.

The same prompts, tool schemas, validation, corrected retry and fallback as
Bedrock (``structured.py``); only the transport differs (``openai_chat.py``).
Extraction uses ``MEMSTACK_OPENAI_MODEL``; consolidation uses
``MEMSTACK_OPENAI_SYNTHESIS_MODEL`` when set (a stronger model for the few
synthesis calls), else the same model.
"""

from __future__ import annotations

from typing import Any

from memstack.adapters.llm.openai_chat import OpenAIChat
from memstack.adapters.llm.structured import StructuredExtractor, StructuredSummariser
from memstack.settings import Settings


def openai_chat(settings: Settings, model: str, client: Any | None = None) -> OpenAIChat:
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return OpenAIChat(
        settings.openai_base_url,
        model,
        api_key=key,
        mode=settings.openai_structured_output,
        temperature=settings.openai_temperature,
        timeout=settings.openai_timeout_seconds,
        client=client,
    )


def openai_extractor(settings: Settings, client: Any | None = None) -> StructuredExtractor:
    chat = openai_chat(settings, settings.openai_model, client)
    return StructuredExtractor(
        chat, name="openai", max_tokens=settings.openai_max_tokens, metrics=chat.metrics
    )


def openai_summariser(settings: Settings, client: Any | None = None) -> StructuredSummariser:
    chat = openai_chat(settings, settings.openai_synthesis_model or settings.openai_model, client)
    return StructuredSummariser(chat, name="openai", metrics=chat.metrics)
