"""Keyword lexicon for the 15 categories: the local extractor, the LLM fallback and consolidation use it.

Each category lists single words (matched with common inflections: "hike"
matches "hiking", "hikes", "hiked") and multi-word phrases (matched literally,
weighted double because they are more specific). The best-scoring category
wins; ties go to the category listed first in ``PRIORITY``.

A tenant's own categories (``domain.tenant``) are matched the same way, by
their keywords and the words of their name (``Lexicon``): beside the built-in
ones (a tie goes to the tenant's own, in the order it lists them) or instead
of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from memstack.models import Category, Kind
from memstack.ports.llm import DEFAULT_GUIDANCE, CategoryChoice, Guidance


def _terms(words: str, *phrases: str) -> tuple[str, ...]:
    """Space-separated single words, then multi-word phrases."""
    return (*words.split(), *phrases)


LEXICON: dict[Category, tuple[str, ...]] = {
    Category.PERSONAL_DETAILS: _terms(
        "name age born birthday live lives living home apartment flat house hometown address nationality "
        "citizen neighbourhood neighborhood moved relocate",
        "years old",
        "live in",
        "living in",
        "grew up",
        "originally from",
    ),
    Category.PROFESSIONAL: _terms(
        "job work career company startup office colleague boss team promoted promotion engineer manager "
        "employer hired client meeting remote nurse teacher lawyer designer developer consultant intern "
        "internship coworker migration deadline workplace profession senior role position",
    ),
    Category.HEALTH: _terms(
        "doctor sprain ankle injury injured sick ill allergic allergy hospital medication medicine "
        "therapy therapist pain diagnosed headache surgery healed sprained twisted fever asthma diabetes "
        "rest physio symptom migraine knee",
        "blood pressure",
        "support group",
        "back pain",
    ),
    Category.RELATIONSHIPS: _terms(
        "partner wife husband girlfriend boyfriend sister brother mother mom mum father dad parents "
        "friend son daughter family married kids children cousin grandma grandmother grandfather dating "
        "aunt uncle fiance fiancee wedding divorced engaged niece nephew roommate",
    ),
    Category.PREFERENCES: _terms(
        "favourite favorite prefer preference like love enjoy hate dislike colour color",
        "fan of",
        "can't stand",
    ),
    Category.HOBBIES: _terms(
        "hike hiking cello guitar piano violin painting drawing reading running jog gaming photography "
        "knitting gardening chess football soccer yoga climbing cycling swimming surfing skiing lessons "
        "hobby crafts pottery fishing camping dance dancing sing singing band concert movies novels",
        "board games",
        "play the",
    ),
    Category.GOALS: _terms(
        "goal goals plan dream aim aspire resolution someday wish ambition aiming",
        "hope to",
        "want to",
        "trying to",
        "saving up",
        "working towards",
        "working toward",
        "planning to",
        "would like to",
        "my target",
    ),
    Category.FINANCIAL: _terms(
        "money saving savings budget salary invest investment debt loan mortgage rent expensive afford "
        "bank price stocks crypto income tax taxes pension paycheck spend spending bills",
        "retirement fund",
        "credit card",
    ),
    Category.EDUCATIONAL: _terms(
        "school university college degree course class study student exam learn thesis phd graduated "
        "graduate lecture tutorial semester homework diploma masters bachelor certificate certification "
        "textbook",
    ),
    Category.TRAVEL: _terms(
        "trip travel flight fly airport visit vacation holiday abroad hotel tour passport journey beach "
        "booked temple sightseeing itinerary backpacking cruise overseas destination",
        "northern lights",
        "road trip",
    ),
    Category.EMOTIONAL: _terms(
        "happy sad stressed stress anxious anxiety excited lonely depressed angry upset proud grateful "
        "worried nervous scared frustrated overwhelmed feel feeling mood cry heartbroken afraid relieved "
        "thrilled",
        "burned out",
        "burnt out",
    ),
    Category.TECHNICAL_SKILLS: _terms(
        "python rust java javascript typescript golang spark sql duckdb kubernetes docker aws programming "
        "code coding cli pipelines linux excel react git api database c++ haskell scala terraform "
        "framework algorithm software",
        "machine learning",
        "data engineering",
    ),
    Category.DIETARY: _terms(
        "vegetarian vegan pescatarian meat food eat diet gluten lactose peanuts peanut recipes dinner "
        "lunch breakfast tofu spicy sushi coffee tea halal kosher keto dairy seafood omakase cuisine "
        "snack sugar alcohol drink",
    ),
    Category.BEHAVIORAL_PATTERNS: _terms(
        "usually always often routine habit daily weekly regularly procrastinate",
        "every morning",
        "every day",
        "every week",
        "every night",
        "every evening",
        "every weekend",
        "each morning",
        "tend to",
        "wake up",
        "times a week",
        "every tuesday",
        "every monday",
        "every wednesday",
        "every thursday",
        "every friday",
        "every saturday",
        "every sunday",
        "most days",
        "on weekends",
        "every year",
    ),
    Category.COMMUNICATION_STYLE: _terms(
        "answer answers replies reply bullet bullet-point concise tone formal informal emoji emojis verbose "
        "respond responses summaries explain explanations wording jargon paragraph paragraphs",
        "bullet points",
        "short answers",
        "long essays",
        "call me",
        "address me",
        "plain language",
        "talk to me",
    ),
}

#: how each category is named in a profile (plain words a question about it would use)
CATEGORY_LABELS: dict[str, str] = {
    Category.PERSONAL_DETAILS: "personal details and background",
    Category.PROFESSIONAL: "work and career",
    Category.HEALTH: "health and wellbeing",
    Category.RELATIONSHIPS: "family, friends and relationships",
    Category.PREFERENCES: "likes and preferences",
    Category.HOBBIES: "hobbies and activities",
    Category.GOALS: "goals and plans",
    Category.FINANCIAL: "money and finances",
    Category.EDUCATIONAL: "education and learning",
    Category.TRAVEL: "travel and trips",
    Category.EMOTIONAL: "feelings and emotions",
    Category.TECHNICAL_SKILLS: "technical skills",
    Category.DIETARY: "food and diet",
    Category.BEHAVIORAL_PATTERNS: "habits and routines",
    Category.COMMUNICATION_STYLE: "communication style",
}
#: what category affinity embeds for each built-in category (its label, then its name's words)
DESCRIPTIONS: tuple[str, ...] = tuple(
    f"{label} ({c.replace('_', ' ')})" for c, label in CATEGORY_LABELS.items()
)

# Tie-break order: the more specific categories before the broad ones.
PRIORITY: tuple[Category, ...] = (
    Category.COMMUNICATION_STYLE,
    Category.DIETARY,
    Category.HEALTH,
    Category.TECHNICAL_SKILLS,
    Category.FINANCIAL,
    Category.EDUCATIONAL,
    Category.TRAVEL,
    Category.BEHAVIORAL_PATTERNS,
    Category.GOALS,
    Category.HOBBIES,
    Category.RELATIONSHIPS,
    Category.EMOTIONAL,
    Category.PROFESSIONAL,
    Category.PERSONAL_DETAILS,
    Category.PREFERENCES,
)


def term_pattern(term: str) -> str:
    escaped = re.escape(term)
    if " " in term or not term.isalpha():
        return rf"(?<!\w){escaped}(?!\w)"
    # Inflections: plural, -ing, -ed, and a dropped final e (hike -> hiking).
    stem = re.escape(term[:-1]) + "(?:e|es|ed|ing)" if term.endswith("e") else escaped
    return rf"\b(?:{escaped}(?:s|es|ed|ing|ies)?|{stem})\b"


class _Term:
    """One keyword's pattern and weight, and a literal its every match contains (lower case).

    ``category_scores`` tries ~420 patterns on every text, most of which cannot match:
    a substring test of ``literal`` in the lower-cased text rules a pattern out ~50x
    faster than searching it (it was ~10% of an ingest's CPU). Case-insensitive
    matching equals lower-casing for ASCII only (the regex also matches 'ſ' for 's'),
    so the test is skipped unless both the literal and the text are ASCII.
    """

    __slots__ = ("literal", "pattern", "weight")

    def __init__(self, term: str) -> None:
        self.pattern = re.compile(term_pattern(term), re.IGNORECASE)
        self.weight = 2.0 if " " in term else 1.0  # a phrase counts double: it is more specific
        # term_pattern: a word matches as itself plus an ending, or (ending in e) without its e
        literal = (term[:-1] if term.endswith("e") else term) if term.isalpha() else term
        self.literal = literal.lower() if literal.isascii() else None


def _patterns(terms: Sequence[str]) -> list[_Term]:
    return [_Term(t) for t in terms]


def _score(terms: list[_Term], text: str, lowered: str | None) -> float:
    """The summed weights of the terms found in ``text`` (``lowered``: the text lower-cased, if ASCII)."""
    if lowered is None:
        return sum(t.weight for t in terms if t.pattern.search(text))
    return sum(
        t.weight for t in terms if (t.literal is None or t.literal in lowered) and t.pattern.search(text)
    )


def _ascii_lower(text: str) -> str | None:
    return text.lower() if text.isascii() else None


@lru_cache(maxsize=1)
def _compiled() -> dict[Category, list[_Term]]:
    return {cat: _patterns(terms) for cat, terms in LEXICON.items()}


def category_scores(text: str) -> dict[Category, float]:
    """How strongly ``text`` speaks to each category (0 when no keyword matches)."""
    lowered = _ascii_lower(text)
    return {cat: _score(terms, text, lowered) for cat, terms in _compiled().items()}


def categorise(text: str, bonus: dict[Category, float] | None = None) -> Category | None:
    """The best category for ``text``; ``None`` when no keyword of any category matches."""
    scores = category_scores(text)
    for cat, extra in (bonus or {}).items():
        scores[cat] = scores.get(cat, 0.0) + extra
    best = max(PRIORITY, key=lambda c: (scores.get(c, 0.0), -PRIORITY.index(c)))
    return best if scores.get(best, 0.0) > 0 else None


def _own_terms(choice: CategoryChoice) -> tuple[str, ...]:
    """A tenant category's keywords, and its name's words of three letters or more ("pets")."""
    named = tuple(w for w in choice.name.split("_") if len(w) >= 3)
    return tuple(dict.fromkeys(t.lower() for t in (*choice.keywords, *named)))


class Lexicon:
    """The categories one tenant files memories under, matched in text like the built-in lexicon.

    ``built_in``: the 15 built-in categories are candidates too (after the tenant's own in a tie).
    """

    def __init__(self, custom: Sequence[CategoryChoice] = (), *, built_in: bool = True) -> None:
        self.built_in = built_in
        self.own: dict[str, list[_Term]] = {c.name: _patterns(_own_terms(c)) for c in custom}
        self.priority: tuple[str, ...] = (*self.own, *(PRIORITY if built_in else ()))

    def scores(self, text: str) -> dict[str, float]:
        """How strongly ``text`` speaks to each of the tenant's categories (0: no keyword matches)."""
        out: dict[str, float] = {str(c): v for c, v in category_scores(text).items()} if self.built_in else {}
        lowered = _ascii_lower(text)
        for name, terms in self.own.items():
            out[name] = _score(terms, text, lowered)
        return out

    def topicality(self, text: str) -> float:
        """How clearly ``text`` is about some topic: the built-in lexicon's best score, or a tenant
        category's (the built-in words judge topics even where the tenant replaced the categories)."""
        lowered = _ascii_lower(text)
        own = (_score(terms, text, lowered) for terms in self.own.values())
        return max([*category_scores(text).values(), *own])

    def categorise(self, text: str, bonus: Mapping[str, float] | None = None) -> str | None:
        """The best of the tenant's categories for ``text``; ``None`` when none of their words match."""
        scores = self.scores(text)
        for name, extra in (bonus or {}).items():
            if name in scores:
                scores[name] += extra
        if not self.priority:
            return None
        best = max(self.priority, key=lambda c: (scores.get(c, 0.0), -self.priority.index(c)))
        return best if scores.get(best, 0.0) > 0 else None

    def fallback(self, kind: Kind) -> str | None:
        """Where a memory no word files goes: the built-in default for its kind, or nowhere (replace)."""
        if not self.built_in:
            return None
        return str(Category.PREFERENCES if kind == Kind.PREFERENCE else Category.PERSONAL_DETAILS)


@lru_cache(maxsize=256)
def lexicon_for(guidance: Guidance = DEFAULT_GUIDANCE) -> Lexicon:
    """The lexicon of a tenant's guidance (one per distinct configuration, kept for reuse)."""
    return Lexicon(guidance.custom, built_in=guidance.built_in)
