"""How far back a pronoun reaches, "it" as the speaker's thing, "we" at home, possessives by name
and terse settings (issue 21 item 7, session 8)."""

from __future__ import annotations

from datetime import UTC, datetime

from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.models import Kind, MemoryRecord, Message, Role, Tier

MARCH = datetime(2024, 3, 1, 10, tzinfo=UTC)
extractor = RuleExtractor()


def _chat(
    *turns: tuple[Role, str], speaker: str = "user", neighbours: list[MemoryRecord] | None = None
) -> list[str]:
    """What the last of ``turns`` makes, the others its context."""
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


def _said(content: str, speaker: str = "user") -> list[str]:
    return _chat((Role.USER, content), speaker=speaker)


def test_he_named_more_than_a_few_sentences_back_is_no_longer_that_person() -> None:
    near = _said("My brother Sami moved to Dubai. He works at a hotel there.")
    assert "The user's brother Sami works at a hotel in Dubai." in near
    far = _said(
        "My brother Sami moved to Dubai. I started bouldering at a new gym. "
        "The routes are graded in colours. I go twice a week. The coach is very patient. "
        "He convinced me to enter a competition."
    )
    assert not any("Sami convinced" in s for s in far)


def test_it_is_the_thing_the_speaker_named_in_their_last_turn() -> None:
    said = _chat(
        (Role.USER, "I'm building a habit tracker app in Flutter."),
        (Role.ASSISTANT, "Nice! Which platform first?"),
        (Role.USER, "Android. I want to get it on the Play Store before March."),
    )
    assert said == ["The user wants to get the user's habit tracker app on the Play Store before March."]


def test_an_opening_it_is_what_the_thing_is_named_as_and_passes_through_a_sentence_naming_none() -> None:
    said = _chat(
        (Role.USER, "My side project is a Next.js 14 app. The build is fine."),
        (Role.ASSISTANT, "Where is it hosted?"),
        (Role.USER, "Mostly evenings. It's all on a single Hetzner box."),
    )
    assert "The user's Next.js 14 app is all on a single Hetzner box." in said


def test_it_is_no_person_nor_a_situation_nor_a_thing_named_too_long_ago() -> None:
    person = _said("I started a pottery class. My teacher is strict. It has a kiln in the back room.")
    assert not any("teacher has a kiln" in s for s in person)
    situation = _chat(
        (Role.USER, "I run a checkout service on Postgres."), (Role.USER, "So it's a seq scan.")
    )
    assert not any("seq scan" in s for s in situation)
    too_long_ago = _said(
        "I bought a standing desk. Work has been hectic. The review is on Thursday. Priya is presenting. "
        "The numbers look fine. It's way too loud in the open office though."
    )
    assert not any("desk is way too loud" in s for s in too_long_ago)


def test_sold_it_takes_back_nothing_older_than_the_thing_just_named() -> None:
    vespa = MemoryRecord(
        id="vespa",
        tenant="t",
        user_id="u",
        tier=Tier.LTM,
        kind=Kind.FACT,
        content="The user has an old Vespa that the user rides to work.",
    )
    turns = [
        "I have an old Vespa.",
        "My sister is getting married in a vineyard. I booked the flights.",
        "I sold it last week.",
    ]
    messages = [
        Message(id=f"m{i}", role=Role.USER, speaker="user", content=text, timestamp=MARCH)
        for i, text in enumerate(turns)
    ]
    # "it" is the flights or nothing: the Vespa was named before them.
    ops = extractor.extract(messages[-1], messages[:-1], [vespa])
    assert not any(o.op == "DELETE" and o.target_id == "vespa" for o in ops)
    # Named just before, the Vespa is what was sold.
    ops = extractor.extract(messages[-1], messages[:1], [vespa])
    assert any(o.target_id == "vespa" for o in ops)


def test_we_at_home_is_the_speaker_and_the_partner_they_named() -> None:
    said = _chat(
        (Role.USER, "I live in Lyon with my boyfriend Tomas."),
        (Role.ASSISTANT, "Lovely city."),
        (Role.USER, "We're moving to Grenoble in the spring."),
        speaker="Ines",
    )
    assert said == ["Ines and Tomas are moving to Grenoble in the spring."]
    # Named long ago: the partner is in the speaker's memories.
    known = MemoryRecord(
        id="home",
        tenant="t",
        user_id="u",
        tier=Tier.LTM,
        kind=Kind.FACT,
        content="Ines lives in Lyon with Ines's boyfriend Tomas.",
    )
    later = _chat(
        (Role.ASSISTANT, "Anything else?"),
        (Role.USER, "We adopted a cat."),
        speaker="Ines",
        neighbours=[known],
    )
    assert later == ["Ines and Tomas adopted a cat."]
    # Nobody named, told to an assistant: a household, neither "family" nor "others".
    alone = _chat((Role.ASSISTANT, "Anything else?"), (Role.USER, "We adopted a cat."), speaker="Ines")
    assert alone == ["Ines's household adopted a cat."]


def test_my_is_the_speaker_by_name_and_our_after_their_group_is_theirs() -> None:
    assert _said("I live in Leeds with my wife Hana.", "Noor") == [
        "Noor lives in Leeds with Noor's wife Hana."
    ]
    said = _chat((Role.ASSISTANT, "How do you deploy?"), (Role.USER, "We deploy our services with Argo CD."))
    assert said == ["The user's team deploy their services with Argo CD."]


def test_a_terse_setting_told_to_an_assistant_is_the_speakers() -> None:
    said = _chat(
        (Role.ASSISTANT, "What are you running?"), (Role.USER, "Stack is Rails 7. DB is Postgres 15.")
    )
    assert said == ["The user's stack is Rails 7.", "The user's DB is Postgres 15."]
    # A name is no thing of the speaker's: "Sarah is from Berlin" is not "my Sarah".
    assert not any(
        s.startswith("The user's Sarah")
        for s in _chat((Role.ASSISTANT, "Hi"), (Role.USER, "Sarah is from Berlin."))
    )


def test_a_sentence_without_its_subject_says_more_about_the_memory_just_made() -> None:
    assert _said("I've been doing yoga for three years. Started during lockdown when my back gave out.") == [
        "The user has been doing yoga for three years; started during lockdown when the user's back gave out."
    ]
    assert _said("I switched to a standing desk. Helped a lot with my back pain.") == [
        "The user switched to a standing desk; helped a lot with the user's back pain."
    ]
    # News of its own (a name) and a reaction stay apart; with nothing before it, it is the speaker's.
    assert len(_said("I work as a nurse. Moved to Cardiff in March.")) == 2
    assert _said("I went to the coast. Had a blast!")[0] == "The user went to the coast."
    assert _said("Started during lockdown, when my back gave out.") == [
        "The user started during lockdown, when the user's back gave out."
    ]
