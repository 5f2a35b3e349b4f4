"""The rule-based extractor: kinds, categories, and ADD / UPDATE / DELETE / NONE against neighbours."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from memstack.adapters.llm.local import LocalExtractor
from memstack.domain.categories import categorise
from memstack.models import Category, Kind, MemoryRecord, Message, Role

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def msg(content: str, *, role: Role = Role.USER, speaker: str | None = "Maya", mid: str = "m1") -> Message:
    return Message(id=mid, role=role, speaker=speaker, content=content, timestamp=SAID)


def memory(content: str, kind: Kind = Kind.FACT, mid: str = "mem1") -> MemoryRecord:
    return MemoryRecord(id=mid, tenant="t", user_id="u", content=content, kind=kind)


extractor = LocalExtractor()


def test_first_person_fact_is_added_in_third_person_with_provenance() -> None:
    ops = extractor.extract(msg("I live in Tokyo with my partner Kenji."), [], [])
    assert [o.op for o in ops] == ["ADD"]
    assert ops[0].content == "Maya lives in Tokyo with their partner Kenji."
    assert ops[0].kind == Kind.FACT
    assert ops[0].category == Category.PERSONAL_DETAILS
    assert ops[0].source_ids == ["m1"]


def test_likes_are_preferences_and_dated_happenings_are_events() -> None:
    pref = extractor.extract(msg("I really love jazz records."), [], [])
    assert pref[0].kind == Kind.PREFERENCE
    event = extractor.extract(msg("I went to the support group yesterday."), [], [])
    assert event[0].kind == Kind.EVENT
    assert event[0].content == "Maya went to the support group on 7 May 2023."
    assert event[0].event_time == datetime(2023, 5, 7, tzinfo=UTC)


def test_assistant_turns_questions_and_small_talk_produce_nothing() -> None:
    assert extractor.extract(msg("I can suggest three recipes.", role=Role.ASSISTANT), [], []) == []
    assert extractor.extract(msg("Do you know any good recipes?"), [], []) == []
    assert extractor.extract(msg("Thanks, that is great!"), [], []) == []


def test_new_value_of_same_attribute_is_an_update_that_keeps_the_rest() -> None:
    old = memory("Maya lives in Tokyo with their partner Kenji.")
    ops = extractor.extract(msg("I moved to Osaka last week."), [], [old])
    update = next(o for o in ops if o.op == "UPDATE")
    assert update.target_id == "mem1"
    assert update.content == "Maya lives in Osaka with their partner Kenji."
    assert update.event_time == datetime(2023, 5, 1, tzinfo=UTC)


def test_same_attribute_of_someone_else_is_not_an_update() -> None:
    sister = memory("Aiko lives in Vancouver.")
    ops = extractor.extract(msg("I live in Osaka."), [], [sister])
    assert [o.op for o in ops] == ["ADD"]


def test_restatement_is_none() -> None:
    known = memory("Maya lives in Tokyo.")
    assert [o.op for o in extractor.extract(msg("I live in Tokyo."), [], [known])] == ["NONE"]
    pref = memory("Maya really loves spicy food.")
    assert [o.op for o in extractor.extract(msg("I really love spicy food!"), [], [pref])] == ["NONE"]


def test_explicit_retraction_deletes_the_memory_it_takes_back() -> None:
    dog = memory("Maya has a dog named Rex.", mid="dog")
    job = memory("Maya works as a nurse at the city hospital.", mid="job")
    ops = extractor.extract(msg("I don't have a dog anymore."), [], [job, dog])
    assert [(o.op, o.target_id) for o in ops] == [("DELETE", "dog")]


def test_retraction_of_something_unknown_is_kept_as_a_fact() -> None:
    ops = extractor.extract(msg("I don't have a car anymore."), [], [memory("Maya has a dog.")])
    assert [o.op for o in ops] == ["ADD"]
    assert ops[0].content == "Maya doesn't have a car anymore."


def test_past_happenings_are_history_not_state() -> None:
    started = memory("Maya started as a data engineer at a startup.", kind=Kind.EVENT)
    ops = extractor.extract(msg("I got promoted to senior data engineer yesterday!"), [], [started])
    assert [o.op for o in ops] == ["ADD"]
    assert ops[0].kind == Kind.EVENT


def test_job_title_update_on_a_stated_fact() -> None:
    job = memory("Maya works as a data engineer at Acme.")
    ops = extractor.extract(msg("I work as a product manager at Acme."), [], [job])
    assert [(o.op, o.content) for o in ops] == [("UPDATE", "Maya works as a product manager at Acme.")]


def test_speakerless_messages_are_about_the_user() -> None:
    ops = extractor.extract(msg("I live in Tokyo.", speaker=None), [], [])
    assert ops[0].content == "The user lives in Tokyo."


def test_extraction_is_deterministic() -> None:
    text = "Hi! I'm vegetarian. I love hiking on weekends and I'm learning Rust."
    first = extractor.extract(msg(text), [], [])
    assert first == extractor.extract(msg(text), [], [])
    # One memory per first-person clause: vegetarian, hiking, Rust.
    assert [o.content for o in first] == [
        "Maya is vegetarian.",
        "Maya loves hiking on weekends.",
        "Maya is learning Rust.",
    ]


CATEGORY_EXAMPLES = {
    Category.PERSONAL_DETAILS: "I was born in Lisbon and grew up there.",
    Category.PROFESSIONAL: "I work at a logistics company as a team lead.",
    Category.HEALTH: "The doctor diagnosed me with asthma.",
    Category.RELATIONSHIPS: "My sister and my brother came over.",
    Category.PREFERENCES: "I like the colour blue.",
    Category.HOBBIES: "I play the guitar in a band.",
    Category.GOALS: "My goal is to run a marathon someday.",
    Category.FINANCIAL: "I'm paying off my student loan and keeping a budget.",
    Category.EDUCATIONAL: "I'm studying for a master's degree at university.",
    Category.TRAVEL: "I'm planning a trip abroad and just got my passport.",
    Category.EMOTIONAL: "I feel stressed and anxious these days.",
    Category.TECHNICAL_SKILLS: "I write Python and SQL every day at work on the database.",
    Category.DIETARY: "I'm vegan and avoid dairy.",
    Category.BEHAVIORAL_PATTERNS: "I usually wake up at five, it's a habit.",
    Category.COMMUNICATION_STYLE: "Please keep your answers concise, no jargon.",
}


def test_every_category_has_an_example() -> None:
    assert set(CATEGORY_EXAMPLES) == set(Category)


@pytest.mark.parametrize(("category", "text"), CATEGORY_EXAMPLES.items())
def test_every_category_is_reachable(category: Category, text: str) -> None:
    ops = extractor.extract(msg(text), [], [])
    assert [o.op for o in ops] == ["ADD"]
    assert ops[0].category == category


def test_lexicon_matches_inflections_not_substrings() -> None:
    assert categorise("We went hiking") == Category.HOBBIES
    assert categorise("an article about partnerships") is None


def test_you_is_the_other_speaker_when_the_context_names_them() -> None:
    before = [Message(id="m0", speaker="Caroline", content="I went to a support group.", timestamp=SAID)]
    ops = extractor.extract(msg("I'm so proud of you for going."), before, [])
    assert ops[0].content == "Maya is so proud of Caroline for going."


def test_sentences_only_about_the_listener_are_not_the_speakers_memories() -> None:
    assert extractor.extract(msg("Sounds like your event was amazing!"), [], []) == []
    assert extractor.extract(msg("Your passion for painting is inspiring."), [], []) == []


def test_instructions_to_the_assistant_are_preferences() -> None:
    [op] = extractor.extract(msg("Please don't use emojis in your replies."), [], [])
    assert (op.kind, op.category) == (Kind.PREFERENCE, Category.COMMUNICATION_STYLE)
