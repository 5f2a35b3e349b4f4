"""Which existing memory a change is about: shared topic words between the new words and each neighbour.

Words are compared by a light stem that also joins agent nouns to their verbs
("teacher" ~ "teaching", "smoker" ~ "smoking"), which a search stemmer such as
Snowball keeps apart; for a topic match that is the point. The subject's own
name, function words and the cue words themselves ("now", "anymore") carry no
topic. Ties go to the earlier neighbour (the extraction handler lists the most
similar first).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import numpy as np

from memstack.adapters.llm.rules.grammar import word_set
from memstack.domain.categories import categorise
from memstack.domain.text import STOPWORDS, words
from memstack.models import Category, Kind, MemoryRecord
from memstack.ports.embedder import Embedder

_NO_TOPIC = word_set(
    "now anymore any longer instead these days nowadays actually really still just also user "
    "family switched switch changed change back moved move new first finally got get one thing "
    "things lot much way time day week month year today yesterday tomorrow please sorry wait "
    "oops correction not never no mean meant like"
)
_SUFFIXES = ("ings", "ing", "ers", "er", "ed", "es", "s", "e")


def stem(word: str) -> str:
    w = word.lower().removesuffix("'s")
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            break
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
        w = w[:-1]  # running -> runn -> run
    return w


def topic(text: str, subject: str = "") -> set[str]:
    """The stems of the topic words of ``text``."""
    drop = {w.lower() for w in subject.split()}
    return {
        stem(w)
        for w in words(text)
        if w not in STOPWORDS and w not in _NO_TOPIC and w not in drop and len(w) > 1 and not w.isdigit()
    }


def named_in(phrase: str, text: str, subject: str = "") -> bool:
    """Every topic word of ``phrase`` (at least one) is in ``text``: "the concert" in "going to a concert"."""
    wanted = topic(phrase, subject)
    return bool(wanted) and wanted <= topic(text, subject)


# A memory that opens with a name other than the speaker's is about that person ("Melanie loves
# running"); one that opens with a function word is about a thing ("The concert was called off").
_OPENING_NAME = re.compile(r"^(?P<name>[A-Z][\w-]*)(?:'s\b|\s)")
_NOT_NAMES = word_set("the a an this that these those it its there their our my his her they we i")


def about_speaker(n: MemoryRecord, subject: str) -> bool:
    """Whether ``n`` may be changed by what ``subject`` says: it names them, or no one else.

    In a conversation between two people both speak in the first person; Caroline's "I've
    switched to running" must not replace Melanie's "Melanie loves swimming"."""
    if subject == "The user" or re.search(rf"\b{re.escape(subject)}\b|\bthe user\b", n.content, re.I):
        return True
    m = _OPENING_NAME.match(n.content)
    return m is None or m.group("name").lower() in _NOT_NAMES


def editable(n: MemoryRecord) -> bool:
    """Consolidation's summaries and syntheses state many things at once: no single change replaces them."""
    return not n.metadata.get("consolidation") and not n.deleted


def best_target(
    text: str,
    neighbours: Iterable[MemoryRecord],
    subject: str,
    *,
    accept: Callable[[MemoryRecord], bool] = lambda _n: True,
    min_shared: int = 1,
    exclude: frozenset[str] = frozenset(),
) -> MemoryRecord | None:
    """The neighbour sharing the most topic words with ``text`` (at least ``min_shared``)."""
    wanted = topic(text, subject)
    best: tuple[int, MemoryRecord] | None = None
    for n in neighbours:
        if n.id in exclude or not editable(n) or not accept(n):
            continue
        shared = len(wanted & topic(n.content, subject))
        if shared >= min_shared and (best is None or shared > best[0]):
            best = (shared, n)
    return best[1] if best else None


def same_category_preference(
    text: str, neighbours: Iterable[MemoryRecord], exclude: frozenset[str] = frozenset()
) -> MemoryRecord | None:
    """The first preference neighbour whose category the text's own words also speak to."""
    category = categorise(text)
    if category in (None, Category.PREFERENCES):
        return None
    for n in neighbours:
        if n.id in exclude or not editable(n) or n.kind != Kind.PREFERENCE:
            continue
        if n.category == category or categorise(n.content) == category:
            return n
    return None


def _neutral(text: str, subject: str) -> str:
    """The text without its subject's name: two memories of Maya are not alike for being about Maya."""
    if subject == "The user":
        return text
    return re.sub(rf"\b{re.escape(subject)}\b", "the user", text)


def most_similar(
    text: str,
    neighbours: Iterable[MemoryRecord],
    subject: str,
    embedder: Embedder,
    *,
    accept: Callable[[MemoryRecord], bool] = lambda _n: True,
    exclude: frozenset[str] = frozenset(),
) -> tuple[MemoryRecord, float] | None:
    """The neighbour whose meaning is closest to ``text``, and the cosine of their vectors:
    "has become a morning person" is about "is a night owl", with no word shared."""
    candidates = [n for n in neighbours if n.id not in exclude and editable(n) and accept(n)]
    if not candidates:
        return None
    vectors = embedder.embed([_neutral(t, subject) for t in [text, *(n.content for n in candidates)]])
    scores = np.asarray(vectors[1:]) @ np.asarray(vectors[0])
    best = int(np.argmax(scores))
    return candidates[best], float(scores[best])
