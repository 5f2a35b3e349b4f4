"""What "our", "we", "there", "they", "it" and a question's "she" / "it" stand for, read from the
speaker's words and the question put to them (issue 21 item 7, session 9)."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.models import Kind, MemoryRecord, Message, Role, Tier

MARCH = datetime(2024, 3, 1, 10, tzinfo=UTC)
extractor = RuleExtractor()


def _chat(
    *turns: tuple[Role, str], speaker: str = "user", neighbours: list[MemoryRecord] | None = None
) -> list[str]:
    """What the last of ``turns`` makes, the others its context (a user turn by ``speaker``; an
    ``Role.ASSISTANT`` turn by the assistant)."""
    messages = [
        Message(
            id=f"m{i}",
            role=role,
            speaker=speaker if role == Role.USER else "assistant",
            content=text,
            timestamp=MARCH,
        )
        for i, (role, text) in enumerate(turns)
    ]
    return [op.content or "" for op in extractor.extract(messages[-1], messages[:-1], neighbours or [])]


def _to_assistant(text: str, speaker: str = "user") -> list[str]:
    return _chat((Role.ASSISTANT, "What are you working on?"), (Role.USER, text), speaker=speaker)


def test_our_at_work_is_the_teams_not_the_speaker_by_name_again() -> None:
    assert _to_assistant("I'm leading the migration of our batch jobs from Spark to DuckDB.", "Maya") == [
        "Maya is leading the migration of the team's batch jobs from Spark to DuckDB."
    ]
    # Named once, as the owner of the team.
    assert _to_assistant("Our billing service is written in Ruby.", "Rafa") == [
        "Rafa's team's billing service is written in Ruby."
    ]
    # "our team" is the speaker's team; "our dog" at home stays the speaker's.
    assert _to_assistant("Our team moved to GitHub Actions.") == ["The user's team moved to GitHub Actions."]
    assert _to_assistant("I walk our dog Mochi every morning.", "Maya") == [
        "Maya walks Maya's dog Mochi every morning."
    ]


def test_a_household_said_to_an_assistant_takes_one_verb_form() -> None:
    assert _to_assistant("The Lisbon trip is booked for May, we fly from Stansted.", "Omar")[-1] == (
        "Omar's household flies from Stansted."
    )
    assert _to_assistant("We're relocating to Osaka.", "Omar") == ["Omar's household is relocating to Osaka."]


def test_we_with_the_speakers_family_is_the_household_not_others() -> None:
    made = _chat(
        (Role.USER, "My brother Kaito is coming over from Sapporo in August."),
        (Role.ASSISTANT, "How lovely! Any plans?"),
        (Role.USER, "We want to take him up Mount Rokko for the night view."),
        speaker="Hana",
    )
    assert made == ["Hana's household wants to take Hana's brother Kaito up Mount Rokko for the night view."]
    partner = MemoryRecord(
        id="p",
        tenant="t",
        user_id="u",
        tier=Tier.LTM,
        kind=Kind.FACT,
        content="Maya lives with Maya's partner Kenji.",
    )
    with_partner = _chat(
        (Role.ASSISTANT, "Anything else?"),
        (Role.USER, "We want to take my sister Aiko to Nara."),
        speaker="Maya",
        neighbours=[partner],
    )
    assert with_partner == ["Maya and Kenji want to take Maya's sister Aiko to Nara."]


def test_there_is_the_place_said_last_with_or_without_a_capital() -> None:
    assert _chat((Role.USER, "I volunteer at the local food bank on Saturdays. I started there in 2022."))[
        1
    ] == ("The user started at the local food bank in 2022.")
    # "the park" said again is the park said as a place before ("near Nakanoshima park").
    walk = _chat(
        (Role.USER, "The apartment is near Nakanoshima park."),
        (Role.USER, "Mochi loves the park, we walk there every morning."),
        speaker="Maya",
    )
    assert "to the park every morning" in walk[-1]
    # A thing beside a place ("a gym near my office") is where one goes, not the office.
    gym = _chat(
        (Role.USER, "I've joined a bouldering gym near my office."),
        (Role.ASSISTANT, "How often do you go?"),
        (Role.USER, "I try to get there three times a week."),
    )
    assert gym == [
        "The user tries to get to the bouldering gym near my office three times a week."
    ] or gym == ["The user tries to get to the bouldering gym near the user's office three times a week."]
    # A time or a manner is no place: "there" stays.
    assert _chat((Role.USER, "I was tired in the morning. I stayed there all day."))[-1].endswith(
        "stayed there all day."
    )


def test_they_after_the_speakers_people_is_them() -> None:
    assert _chat((Role.USER, "My in-laws are retiring to Spain. They bought a house near Malaga."))[-1] == (
        "The user's in-laws bought a house near Malaga."
    )
    # A company named just before is still the company, without the sentence's full stop.
    offer = _chat((Role.USER, "I interviewed with Klarna. They offered me the job."))
    assert offer[-1] == "Klarna offered the user the job."


def test_a_pronoun_answering_a_question_about_the_speakers_person_is_that_person() -> None:
    made = _chat(
        (Role.USER, "How's your brother doing these days?"),
        (Role.USER, "Good! He just moved to Lyon for a job at Renault."),
        speaker="Sara",
    )
    # Asked by the speaker themselves, "How's" names no one and "he" is left as said: no memory.
    assert made == []
    messages = [
        Message(
            id="q",
            role=Role.USER,
            speaker="Nina",
            content="How's your brother doing these days?",
            timestamp=MARCH,
        ),
        Message(
            id="a",
            role=Role.USER,
            speaker="Sara",
            content="Good! He just moved to Lyon for a job at Renault.",
            timestamp=MARCH,
        ),
    ]
    ops = extractor.extract(messages[1], messages[:1], [])
    assert [o.content for o in ops] == ["Sara's brother just moved to Lyon for a job at Renault."]


def test_it_opening_with_a_verb_of_its_own_is_the_speakers_thing() -> None:
    made = _chat((Role.USER, "I wrote a small Rust CLI that syncs my dotfiles. It uses git under the hood."))
    assert made[-1] == "The user's small Rust CLI uses git under the hood."
    # "It seems", "It takes": said of no thing.
    assert _chat((Role.USER, "I wrote a small Rust CLI. It seems to work."))[-1:] != [
        "The user's small Rust CLI seems to work."
    ]


def test_an_answer_to_a_question_about_the_speakers_person_or_thing_is_completed() -> None:
    going = _chat(
        (Role.USER, "My daughter is starting university in October."),
        (Role.ASSISTANT, "Exciting! Where is she going?"),
        (Role.USER, "Edinburgh, to study veterinary medicine."),
    )
    assert going == ["The user's daughter is going to Edinburgh, to study veterinary medicine."]
    expires = _chat(
        (Role.USER, "I need to renew my passport before the trip."),
        (Role.ASSISTANT, "When does it expire?"),
        (Role.USER, "End of November, and the trip is in January."),
    )
    assert expires == ["The user's passport expires end of November 2023, and the trip is in January 2024."]


def test_a_setting_named_by_two_words_is_the_speakers() -> None:
    assert _to_assistant("The orders database is MySQL 5.7 on RDS.") == [
        "The user's orders database is MySQL 5.7 on RDS."
    ]
