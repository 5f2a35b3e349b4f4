"""Keyword scores skip patterns whose literal is absent, and still equal searching every pattern."""

from __future__ import annotations

import re

import pytest
from memstack.domain.categories import LEXICON, Lexicon, category_scores, term_pattern
from memstack.models import Category
from memstack.ports.llm import CategoryChoice

OWN = CategoryChoice("pets", "the user's pets", ("dog", "litter box", "café", "c++"))

TEXTS = [
    "I love HIKING and we hiked the Alps; she hikes weekly.",
    "My sister's a nurse; Mom had surgery and her blood pressure is fine.",
    "Vegetarian since May, no peanuts: I ate Sushi at the Café.",
    "I code in C++ and Rust, bullet-point answers please, can't stand fluff.",
    "Lives in a house in Lisbon, 34 years old; relocating, dancing and LIKING it.",
    "Ich liebe ſushi und Hiking",  # 'ſ' matches 's' case-insensitively, but lower() keeps it 'ſ'
    "The DOG's vet and the Litter Box.",
    "",
]


def _searched(terms: tuple[str, ...], text: str) -> float:
    return sum((2.0 if " " in t else 1.0) for t in terms if re.search(term_pattern(t), text, re.IGNORECASE))


@pytest.mark.parametrize("text", TEXTS)
def test_scores_equal_searching_every_pattern(text: str) -> None:
    assert category_scores(text) == {cat: _searched(terms, text) for cat, terms in LEXICON.items()}
    own = Lexicon([OWN]).scores(text)["pets"]
    assert own == _searched(("dog", "litter box", "café", "c++", "pets"), text)


def test_a_non_ascii_text_is_searched_in_full() -> None:
    # 'ſushi' contains no 'sushi' once lower-cased, yet the pattern matches it
    assert category_scores("ſushi for dinner") == category_scores("sushi for dinner")
    assert category_scores("sushi for dinner")[Category.DIETARY] > 0
