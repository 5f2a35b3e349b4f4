"""The third-person rewrite: lemminflect's verb forms, coordinated verbs, compound subjects."""

from __future__ import annotations

import pytest
from memstack.adapters.llm.rules import grammar
from memstack.adapters.llm.rules.rewrite import to_third_person

# The verbs the hand-written suffix rules got wrong, and the words they took for verbs.
HARD_VERBS = {"quiz": "quizzes", "tango": "tangos", "solo": "solos", "fly": "flies", "veto": "vetoes"}


@pytest.mark.parametrize(("base", "third"), HARD_VERBS.items())
def test_third_person_forms_come_from_the_inflection_tables(base: str, third: str) -> None:
    assert grammar.third_person(base) == third


def test_words_that_are_not_verbs_are_left_alone() -> None:
    assert [grammar.third_person(w) for w in ("no", "really", "never")] == ["no", "really", "never"]
    assert grammar.is_adverb("really") and not grammar.is_adverb("fly")
    assert grammar.is_past("went") and grammar.is_past("quit") and not grammar.is_past("go")


@pytest.mark.parametrize(
    ("said", "memory"),
    [
        ("I no longer drink it.", "Kim no longer drinks it."),
        ("I live in Osaka and work as a nurse.", "Kim lives in Osaka and works as a nurse."),
        ("I fly drones on weekends.", "Kim flies drones on weekends."),
        ("My wife and I run a small bakery.", "Kim and Kim's wife run a small bakery."),
        ("Leo and I broke up.", "Leo and Kim broke up."),
        ("These days I mostly read science fiction.", "These days Kim mostly reads science fiction."),
        ("I quit smoking.", "Kim quit smoking."),
        (
            "I usually catch the early train and I carry my bike.",
            "Kim usually catches the early train and Kim carries Kim's bike.",
        ),
        ("I like music and dance.", "Kim likes music and dance."),
    ],
)
def test_rewrite(said: str, memory: str) -> None:
    assert to_third_person(said, "Kim") == memory
