"""Who "she", "he", "they" and "her name" are when the person was named sentences or turns before,
and sentences that only say more about the memory before them (issue 21 item 7)."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.models import Message, Role

MARCH = datetime(2024, 3, 1, 10, tzinfo=UTC)
extractor = RuleExtractor()


def _turns(*turns: tuple[str, str]) -> list[str]:
    """What the last of ``turns`` ((speaker, text), all users) makes, the others its context."""
    messages = [
        Message(id=f"m{i}", role=Role.USER, speaker=speaker, content=text, timestamp=MARCH)
        for i, (speaker, text) in enumerate(turns)
    ]
    return [op.content or "" for op in extractor.extract(messages[-1], messages[:-1], [])]


def _said(content: str, speaker: str = "user") -> list[str]:
    return _turns((speaker, content))


def test_she_two_sentences_after_the_person_is_that_person() -> None:
    said = _said(
        "My niece Tamar passed her driving test. We are all so relieved. "
        "She starts motorway lessons with an instructor from Leeds."
    )
    assert "The user's niece Tamar starts motorway lessons with an instructor from Leeds." in said


def test_he_in_a_later_turn_is_the_name_the_speaker_said_beside_themselves() -> None:
    said = _turns(
        ("Ines", "Me and Bruno sold the boat last summer."),
        ("Kai", "Oh really? Why?"),
        ("Ines", "Too much upkeep. He kept the trailer in Faro."),
    )
    assert "Bruno kept the trailer in Faro." in said


def test_she_after_her_name_is_the_person_the_name_was_given_to() -> None:
    said = _said(
        "Had a call with my therapist today. Her name is Odile. She said the panic attacks come from work."
    )
    assert any(s == "The user's therapist said the panic attacks come from work." for s in said)


def test_they_after_a_company_the_speaker_applied_to_is_that_company() -> None:
    said = _said("I applied to Basecamp in January. They rejected me after the second round.")
    assert said[-1] == "Basecamp rejected the user after the second round."


def test_her_name_after_something_the_speaker_got_is_its_name() -> None:
    said = _said("We bought a sailing dinghy in April. Her name is Wren and she leaks a bit.")
    assert said[-1].startswith("The user's sailing dinghy's name is Wren")


def test_there_is_the_place_not_the_spot_within_it() -> None:
    said = _turns(
        ("Noa", "We spent a week in Sicily, mostly around Catania."),
        ("Eli", "Sounds great."),
        ("Noa", "I'd love to go back there with my kids."),
    )
    assert said == ["Noa would love to go back to Sicily with Noa's kids."]


def test_with_a_tool_after_a_verb_of_building_is_no_person() -> None:
    said = _said("I built the whole pipeline with Dagster. I showed her the dashboards yesterday.")
    assert "Dagster" not in said[-1]


def test_her_before_an_adverb_is_whom_and_a_man_named_in_the_clause_is_not_her() -> None:
    said = _said("My aunt Noor lives alone in Izmir. My uncle Emre visits her weekly.")
    assert said[-1] == "The user's uncle Emre visits the user's aunt Noor weekly."


def test_what_someone_else_did_too_joins_the_memory_it_repeats() -> None:
    said = _said("I gave up alcohol in 2022. My brother did too, actually. Mostly for his sleep.")
    assert said == [
        "The user gave up alcohol in 2022; the user's brother did too, actually; "
        "mostly for the user's brother's sleep."
    ]


def test_for_this_and_diagnosed_after_join_what_they_explain() -> None:
    assert _said("I am learning Greek. For this I meet a tutor every Tuesday.") == [
        "The user is learning Greek; for this the user meets a tutor every Tuesday."
    ]
    assert _said("I can't eat gluten. Got diagnosed after months of stomach trouble.") == [
        "The user can't eat gluten; the user got diagnosed after months of stomach trouble."
    ]


def test_a_sentence_without_a_verb_joins_the_memory_before_it() -> None:
    assert _said("I play a cello. A present from my teacher, who retired last year.") == [
        "The user plays a cello; a present from the user's teacher, who retired in 2023."
    ]
    assert _said("I sold the motorbike. Too dangerous to ride in winter.") == [
        "The user sold the motorbike; too dangerous to ride in winter."
    ]


def test_a_participle_that_leads_into_a_clause_stays_with_it() -> None:
    assert _said("Having grown up in Quebec, I speak French at home.") == [
        "Having grown up in Quebec, the user speaks French at home."
    ]
    # A gerund that is the subject of its own verb is a clause of its own.
    assert _said("Networking plays a big role in sales, and I'm grateful for my mentors.", "Jo") == [
        "Jo is grateful for Jo's mentors."
    ]


def test_a_reason_about_no_speaker_joins_the_memory_it_explains() -> None:
    assert _said("I cancelled the gym membership. Nobody at that gym ever wiped the machines anyway.") == [
        "The user cancelled the gym membership; nobody at that gym ever wiped the machines anyway."
    ]
    assert _said("I quit running. Burned out, mostly, after the Rotterdam marathon.") == [
        "The user quit running; the user burned out, mostly, after the Rotterdam marathon."
    ]
    # Said to the listener, a reaction or a verdict in passing, a photo's caption, or what only leads into
    # a clause of the speaker's: not joined.
    assert _said("The build is slow. To fix this, I moved the cache to a tmpfs.") == [
        "The user moved the cache to a tmpfs."
    ]
    assert _said("I moved the backups to S3. Did you see that?") == ["The user moved the backups to S3."]
    assert _said("I love traveling too. That photo is awesome, the Eiffel Tower is so cool!", "Tim") == [
        "Tim loves traveling too."
    ]
    assert _said("I love traveling too. That photo of the old harbour looks stunning.", "Tim") == [
        "Tim loves traveling too."
    ]


def test_asking_for_a_second_opinion_is_a_request() -> None:
    assert _said("I'd like a second opinion on whether to move the queue to Kafka.") == []
