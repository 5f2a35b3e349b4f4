"""The local extractor: deterministic, rule-based, no network (the offline default).

For each sentence of a user's message it decides, against the most similar
current memories (the neighbours):

- a retraction ("I don't have a dog anymore") -> DELETE of the memory it retracts;
- a new value for an attribute already known ("I moved to Osaka" when a memory
  says "lives in Tokyo") -> UPDATE of that memory;
- a restatement of something known -> NONE;
- anything else worth keeping -> ADD, with a kind (likes/dislikes/prefer are
  preferences, dated or past happenings are events, the rest facts) and a
  category from the keyword lexicon.

Assistant, system and tool turns, questions and small talk produce nothing.
"""

from __future__ import annotations

import re
from datetime import datetime

from memstack.adapters.llm.attributes import AttributeValue, find_attributes, same_value
from memstack.adapters.llm.lexicon import categorise, category_scores
from memstack.adapters.llm.rewrite import (
    IRREGULAR_PAST,
    is_first_person,
    subject_name,
    to_third_person,
)
from memstack.domain.extraction.relative import is_future, resolve_relative_dates
from memstack.domain.text import STOPWORDS, words
from memstack.models import Category, Kind, MemoryRecord, Message, Role
from memstack.ports.llm import ExtractionOp

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(
    r"^(?:(?:hi|hello|hey|yes|yeah|yep|no|nope|well|so|oh|ok|okay|actually|anyway|btw|by the way|ah|haha|"
    r"lol|wow|also|and|but|plus|honestly|sure)\b[,!.:]?\s*|[\w' ]{1,24}:\s+|[\w-]+-wise,\s*)",
    re.IGNORECASE,
)
# Preferences are the user's own: "I (really) love ...", "my favourite ...", "please don't ...".
_PREFERENCE = re.compile(
    r"\b(?:I|we)(?:\s+(?:really|also|just|still|absolutely|totally|do|don't|do not|\w+ly))*\s+"
    r"(?:like|love|enjoy|prefer|hate|dislike|adore|can't stand|cannot stand|am a fan of|'m a fan of)\b"
    r"|\b(?:my|our) (?:all-time )?favou?rite\b|\bplease (?:don't|do not|always|never|use|keep|avoid)\b",
    re.IGNORECASE,
)
_NOT_PREFERENCE = re.compile(
    r"\b(?:would|'d) (?:like|love) to\b|\blooks like\b|\bfeels like\b", re.IGNORECASE
)
_FIRST_VERB = re.compile(
    r"\b(?:I|we)(?:'ve| have)?(?:\s+(?:just|finally|already|also|recently|\w+ly))*\s+(?P<verb>[a-z']+)",
    re.IGNORECASE,
)
_ANYMORE = r"\b(?:anymore|any more|any longer)\b"
_RETRACTION = [
    re.compile(
        r"\b(?:I|we)\s+(?:don't|do not|dont|no longer)\s+(?P<verb>\w+)\s+(?P<rest>.*?)\s*" + _ANYMORE,
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:I|we)\s+no longer\s+(?P<verb>\w+)\s+(?P<rest>[^,.;!]*)", re.IGNORECASE),
    re.compile(
        r"\b(?:I'm|I am|we're|we are)\s+(?:no longer|not)\s+(?P<verb>)(?P<rest>.*?)\s*" + _ANYMORE,
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:I'm|I am|we're|we are)\s+no longer\s+(?P<verb>)(?P<rest>[^,.;!]*)", re.IGNORECASE),
    re.compile(
        r"\b(?:I|we)\s+(?:have\s+)?(?:stopped|quit|gave up|given up)\s+(?P<verb>)(?P<rest>[^,.;!]*)",
        re.IGNORECASE,
    ),
]
_SMALL_TALK = re.compile(
    r"^(?:thanks?|thank you|ok(?:ay)?|cool|great|nice|sure|bye|good (?:morning|night|evening)|lol|haha|"
    r"(?:that |it )?sounds|that's (?:so |really )?(?:great|awesome|amazing|cool|nice|wonderful)|"
    r"it must|must be|what a|how (?:cool|nice|great|awesome)|congrat\w*|cute|aww?)\b",
    re.IGNORECASE,
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'll|you'd)\b", re.IGNORECASE)
_INSTRUCTION = re.compile(r"^(?:please|always|never|don't|do not|avoid|stop)\b", re.IGNORECASE)
# A sentence about neither speaker must speak clearly to some category to be worth keeping.
_MIN_TOPIC_SCORE = 2.0
RESTATEMENT_OVERLAP = 0.7


def _content_words(text: str) -> set[str]:
    return {w.rstrip("s") for w in words(text) if w not in STOPWORDS and len(w) > 1}


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of content words (plural s ignored)."""
    wa, wb = _content_words(a), _content_words(b)
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def split_sentences(text: str) -> list[str]:
    out = []
    for raw in _SENTENCE_END.split(text.replace("’", "'").strip()):
        sentence = raw.strip()
        while (m := _LEAD.match(sentence)) and m.end() < len(sentence):
            sentence = sentence[m.end() :].lstrip()
        if sentence:
            out.append(sentence[0].upper() + sentence[1:])
    return out


def _kind(sentence: str, dated: bool) -> Kind:
    if _INSTRUCTION.match(sentence) or (
        _PREFERENCE.search(sentence) and not _NOT_PREFERENCE.search(sentence)
    ):
        return Kind.PREFERENCE
    if dated:
        return Kind.EVENT
    m = _FIRST_VERB.search(sentence)
    if m:
        verb = m.group("verb").lower()
        if verb not in ("was", "were", "had", "used", "need", "needed") and (
            verb in IRREGULAR_PAST or verb.endswith("ed")
        ):
            return Kind.EVENT
    return Kind.FACT


class LocalExtractor:
    """Rule-based ``Extractor``: same input, same operations, on any machine."""

    name = "local"

    def extract(
        self, message: Message, context: list[Message], neighbours: list[MemoryRecord]
    ) -> list[ExtractionOp]:
        if message.role != Role.USER:
            return []
        subject = subject_name(message.speaker)
        listener = self.listener(message, context)
        ops: list[ExtractionOp] = []
        for sentence in split_sentences(message.content):
            op = self._sentence(sentence, message, subject, listener, neighbours, ops)
            ops.extend(op)
        return ops

    @staticmethod
    def listener(message: Message, context: list[Message]) -> str | None:
        """Who "you" is: the other person in the conversation, when a previous turn names them."""
        for turn in reversed(context):
            if turn.role == Role.USER and turn.speaker and turn.speaker != message.speaker:
                return turn.speaker
        return None

    # ------------------------------------------------------------------ one sentence
    def _sentence(
        self,
        sentence: str,
        message: Message,
        subject: str,
        listener: str | None,
        neighbours: list[MemoryRecord],
        earlier: list[ExtractionOp],
    ) -> list[ExtractionOp]:
        if sentence.endswith("?") or _SMALL_TALK.match(sentence) or len(words(sentence)) < 3:
            return []
        name = re.fullmatch(r"(?:I'm|I am|my name is|call me)\s+([A-Z][\w-]*)[.!]?", sentence, re.IGNORECASE)
        if name:
            if name.group(1).casefold() == subject.casefold():
                return []  # introducing themselves by the name we already know them by
            sentence = f"My name is {name.group(1)}."
        first_person = is_first_person(sentence)
        about_listener = bool(_SECOND_PERSON.search(sentence))
        instruction = bool(_INSTRUCTION.match(sentence))  # "Please keep your answers short": a preference
        if not (first_person or instruction) and (
            about_listener or max(category_scores(sentence).values()) < _MIN_TOPIC_SCORE
        ):
            return []  # about the other speaker, or small talk without a topic
        sources = [message.id]
        retraction = self._retraction(sentence, neighbours, sources)
        if retraction is not None:
            return retraction
        when = message.timestamp
        resolved = resolve_relative_dates(sentence, when) if when else None
        text = to_third_person(resolved.text if resolved else sentence, subject, listener)
        text = text[0].upper() + text[1:]
        dated = bool(resolved and resolved.event_time)
        kind = _kind(sentence, dated)
        event_time = resolved.event_time if resolved and resolved.event_time else None
        if kind == Kind.EVENT and event_time is None:
            event_time = when
        # Categorise the words the user said: the rewrite adds words ("and family") of its own.
        said = resolved.text if resolved else sentence
        category = categorise(said, {Category.PREFERENCES: 1.5} if kind == Kind.PREFERENCE else None)
        category = category or (
            Category.PREFERENCES if kind == Kind.PREFERENCE else Category.PERSONAL_DETAILS
        )

        future = is_future(sentence)
        attrs = [] if future else find_attributes(text, subject)
        for attr in attrs:
            update = self._update(attr, text, kind, category, event_time, subject, neighbours, sources)
            if update is not None:
                return update
        # Already known, word for word or nearly: nothing to do.
        for n in neighbours:
            if overlap(text, n.content) >= RESTATEMENT_OVERLAP:
                return [ExtractionOp(op="NONE", target_id=n.id, source_ids=sources)]
        if any(o.content and overlap(text, o.content) >= RESTATEMENT_OVERLAP for o in earlier):
            return []
        return [
            ExtractionOp(
                op="ADD",
                content=text,
                kind=kind,
                category=category,
                event_time=event_time,
                source_ids=sources,
            )
        ]

    @staticmethod
    def _update(
        attr: AttributeValue,
        text: str,
        kind: Kind,
        category: Category,
        event_time: datetime | None,
        subject: str,
        neighbours: list[MemoryRecord],
        sources: list[str],
    ) -> list[ExtractionOp] | None:
        """NONE for a known value, UPDATE for a new value of a known attribute, None if unknown."""
        for n in neighbours:
            for old in find_attributes(n.content, subject):
                if old.name != attr.name:
                    continue
                if same_value(old.value, attr.value):
                    return [ExtractionOp(op="NONE", target_id=n.id, source_ids=sources)]
                if n.kind == Kind.EVENT:
                    continue  # a past happening stays true ("started as an engineer"): history, not state
                ops: list[ExtractionOp] = []
                if old.stative:
                    # "lives in Tokyo with their partner" -> "lives in Osaka with their partner":
                    # the rest of what the memory says stays true.
                    start, end = old.span
                    content = n.content[:start] + attr.value + n.content[end:]
                    if kind == Kind.EVENT:
                        ops.append(
                            ExtractionOp(
                                op="ADD",
                                content=text,
                                kind=kind,
                                category=category,
                                event_time=event_time,
                                source_ids=sources,
                            )
                        )
                    new_kind: Kind = n.kind
                    new_category = n.category or category
                else:
                    content = f"{text.rstrip('.!')} (previously {old.value})."
                    new_kind, new_category = kind, category
                ops.insert(
                    0,
                    ExtractionOp(
                        op="UPDATE",
                        target_id=n.id,
                        content=content,
                        kind=new_kind,
                        category=new_category,
                        event_time=event_time,
                        source_ids=sources,
                    ),
                )
                return ops
        return None

    @staticmethod
    def _retraction(
        sentence: str, neighbours: list[MemoryRecord], sources: list[str]
    ) -> list[ExtractionOp] | None:
        """DELETE the memory an explicit retraction takes back; None when the sentence retracts nothing."""
        for pattern in _RETRACTION:
            m = pattern.search(sentence)
            if not m:
                continue
            target_words = _content_words(f"{m.group('verb')} {m.group('rest')}") - {"anymore", "longer"}
            head = _content_words(m.group("rest"))
            if not head:
                return None
            best: tuple[int, MemoryRecord] | None = None
            for n in neighbours:
                have = _content_words(n.content)
                if not head & have:
                    continue
                score = len(target_words & have)
                if best is None or score > best[0]:
                    best = (score, n)
            if best is not None:
                return [ExtractionOp(op="DELETE", target_id=best[1].id, source_ids=sources)]
            return None
        return None
