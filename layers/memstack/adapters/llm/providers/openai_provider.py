"""``MEMSTACK_LLM=openai``: extraction and consolidation on an OpenAI-compatible server.

The same prompts, tool schemas, validation, corrected retry and fallback as
Bedrock (``structured.py``); only the transport differs (``openai_chat.py``).
Extraction uses ``MEMSTACK_OPENAI_MODEL``; consolidation uses
``MEMSTACK_OPENAI_SYNTHESIS_MODEL`` when set (a stronger model for the few
synthesis calls), else the same model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memstack.adapters.llm.providers.openai_chat import OpenAIChat
from memstack.adapters.llm.providers.structured import StructuredExtractor, StructuredSummariser
from memstack.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.ports.embedder import Embedder


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
        chat,
        name="openai",
        max_tokens=settings.openai.max_tokens,
        metrics=chat.metrics,
        timezone=settings.timezone,
    )


def openai_summariser(settings: Settings, client: Any | None = None) -> StructuredSummariser:
    chat = openai_chat(settings, settings.openai.synthesis_model or settings.openai.model, client)
    return StructuredSummariser(chat, name="openai", metrics=chat.metrics)


def build_extractor(
    settings: Settings, clients: Mapping[str, Any], embedder: Embedder | None
) -> StructuredExtractor:
    """``MEMSTACK_LLM=openai``; ``clients["openai_http"]`` (an ``httpx.Client``) when given."""
    return openai_extractor(settings, clients.get("openai_http"))


def build_summariser(settings: Settings, clients: Mapping[str, Any]) -> StructuredSummariser:
    """``MEMSTACK_LLM=openai`` (``factory.SUMMARISERS``)."""
    return openai_summariser(settings, clients.get("openai_http"))
