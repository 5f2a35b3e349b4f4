"""Extraction of a long message: the extractor reads its start, the job finishes, the turn stays whole."""

from __future__ import annotations

from typing import Any

from memstack.factory import build_service
from memstack.models import Message
from memstack.ports.llm import ExtractionOp
from memstack.settings import Settings

T, U = "t1", "u1"
#: ~60,000 characters of sentences, each naming its number
LONG = " ".join(f"Sentence {i} says the deploy step {i} passed." for i in range(1500))


class Reading:
    """An extractor that records what it was given and decides nothing."""

    name = "reading"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def extract(
        self, message: Message, context: list[Message], neighbours: list, guidance: Any = None
    ) -> list[ExtractionOp]:
        self.seen.append(message.content)
        return []


def test_the_extractor_reads_a_long_message_up_to_its_limit(settings: Settings) -> None:
    extractor = Reading()
    service = build_service(settings, extractor=extractor)
    try:
        result = service.add(
            T, U, [Message(id="m1", content=LONG, timestamp="2026-03-02T10:00:00Z")], sync=True
        )  # type: ignore[arg-type]
        entry = service.stm.get(T, U, "m1")
    finally:
        service.close()
    limit = settings.extraction.max_chars
    [seen] = extractor.seen
    assert result.processed and entry is not None and entry.extraction == "done"
    assert len(LONG) > limit >= len(seen) > limit // 2 and LONG.startswith(seen)
    assert seen.endswith(".")  # cut where a sentence ends, not inside a word
    assert entry.message.content == LONG
