"""A deterministic synthetic conversation for benchmarks: any size, same text on every machine.

Words are drawn from a Zipf distribution over a fixed vocabulary (as in real
text, a few words are in many turns and most are rare), so BM25 posting lists
and vector neighbourhoods have realistic shapes at every size. Turns look like
chat lines ("Maya: ..."), carry a timestamp and a session, and queries are
questions over the same vocabulary. Nothing is read from disk or the network.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memstack.models import Message, Role

_SYLLABLES = tuple(
    "ka ri to na mi so le va du pe lo ha ze ni mu ra te shi ko ba yu fe go ji ta we qu ly ro sa".split()  # noqa: SIM905
)
_FUNCTION = tuple("i the a to and my we it was is of in for on at with that you so but just".split())  # noqa: SIM905
_SPEAKERS = ("Maya", "assistant")
_QUESTIONS = ("what did I say about", "when did we talk about", "do you remember", "tell me about")

VOCABULARY_SIZE = 6000
#: queries name words from this frequency rank on
_TOPIC_FROM = 30
_START = datetime(2024, 1, 1, tzinfo=UTC)


def _vocabulary(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    seen: dict[str, None] = {}
    while len(seen) < size:
        seen.setdefault("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))), None)
    return list(seen)


@dataclass
class Corpus:
    """Turns and queries drawn from one seeded generator."""

    seed: int = 7

    def __post_init__(self) -> None:
        self.words = _vocabulary(VOCABULARY_SIZE, self.seed)
        # Zipf weights (s = 1.07, close to English) over the vocabulary, as cumulative sums.
        weights = [1.0 / (rank**1.07) for rank in range(1, len(self.words) + 1)]
        total = 0.0
        self._cumulative = []
        for w in weights:
            total += w
            self._cumulative.append(total)

    def _content_words(self, rng: random.Random, n: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self._cumulative, k=n)

    def sentence(self, rng: random.Random) -> str:
        tokens = self._content_words(rng, rng.randint(6, 18))
        for _ in range(rng.randint(2, 6)):
            tokens.insert(rng.randrange(len(tokens) + 1), rng.choice(_FUNCTION))
        return " ".join(tokens).capitalize() + "."

    def messages(self, n: int, *, offset: int = 0, prefix: str = "m") -> Iterator[Message]:
        """``n`` turns (ids ``<prefix><offset + i>``), a minute apart, alternating speakers."""
        for i in range(offset, offset + n):
            rng = random.Random(f"{self.seed}:turn:{i}")
            speaker = _SPEAKERS[i % 2]
            yield Message(
                id=f"{prefix}{i}",
                role=Role.USER if speaker != "assistant" else Role.ASSISTANT,
                speaker=speaker,
                content=self.sentence(rng),
                timestamp=_START + timedelta(minutes=i),
            )

    def queries(self, n: int) -> list[str]:
        """``n`` questions naming two or three topic words.

        Topic words are drawn with the same Zipf weights, but below the 30 commonest
        words: a question names what it is about, and the words every other turn
        contains (the speaker's name, "like", "really") are not what it asks for.
        """
        topical, weights = self.words[_TOPIC_FROM:], self._cumulative[_TOPIC_FROM:]
        base = self._cumulative[_TOPIC_FROM - 1]
        shifted = [w - base for w in weights]
        out = []
        for i in range(n):
            rng = random.Random(f"{self.seed}:query:{i}")
            picks = rng.choices(topical, cum_weights=shifted, k=rng.randint(2, 3))
            out.append(f"{rng.choice(_QUESTIONS)} {' '.join(picks)}?")
        return out
