"""The rule-based extractor: kinds, categories, and ADD / UPDATE / DELETE / NONE against neighbours."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.domain.categories import categorise
from memstack.models import Category, Kind, MemoryRecord, Message, Role

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def msg(content: str, *, role: Role = Role.USER, speaker: str | None = "Maya", mid: str = "m1") -> Message:
    return Message(id=mid, role=role, speaker=speaker, content=content, timestamp=SAID)


def memory(content: str, kind: Kind = Kind.FACT, mid: str = "mem1") -> MemoryRecord:
    return MemoryRecord(id=mid, tenant="t", user_id="u", content=content, kind=kind)


extractor = RuleExtractor()


def test_first_person_fact_is_added_in_third_person_with_provenance() -> None:
    ops = extractor.extract(msg("I live in Tokyo with my partner Kenji."), [], [])
    assert [o.op for o in ops] == ["ADD"]
    assert ops[0].content == "Maya lives in Tokyo with Maya's partner Kenji."
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
    moved = memory("Maya moved to Tokyo in 2020.", kind=Kind.EVENT)
    ops = extractor.extract(msg("I moved to Osaka yesterday!"), [], [moved])
    assert [o.op for o in ops] == ["ADD"]
    assert ops[0].kind == Kind.EVENT
    # A role is the exception: the job a career started in is the job until a promotion says otherwise.
    started = memory("Maya started as a data engineer at a startup.", kind=Kind.EVENT)
    ops = extractor.extract(msg("I got promoted to senior data engineer yesterday!"), [], [started])
    assert [(o.op, o.target_id, o.kind) for o in ops] == [("UPDATE", started.id, Kind.EVENT)]


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


def ops_of(text: str, *known: MemoryRecord) -> list[tuple[str, str | None, str | None]]:
    return [(o.op, o.target_id, o.content) for o in extractor.extract(msg(text), [], list(known))]


def test_a_preference_between_two_things_is_updated_when_it_flips() -> None:
    tea = memory("Maya prefers tea over coffee.", kind=Kind.PREFERENCE, mid="tea")
    assert ops_of("Actually I prefer coffee over tea now.", tea) == [
        ("UPDATE", "tea", "Maya prefers coffee over tea now.")
    ]


def test_forget_deletes_and_stores_nothing_of_the_command() -> None:
    coffee = memory("Maya likes coffee.", kind=Kind.PREFERENCE, mid="coffee")
    assert ops_of("Forget that I like coffee, I no longer drink it.", coffee) == [("DELETE", "coffee", None)]


def test_a_correction_replaces_the_value_it_names() -> None:
    sister = memory("Maya's sister's name is Anna.", mid="sis")
    assert ops_of("Sorry, I meant Hannah, not Anna.", sister) == [
        ("UPDATE", "sis", "Maya's sister's name is Hannah.")
    ]
    shop = memory("Maya works at Shopify on the payments team.", mid="job")
    assert ops_of("Actually it's Stripe, not Shopify.", shop) == [
        ("UPDATE", "job", "Maya works at Stripe on the payments team.")
    ]


def test_an_ending_replaces_the_memory_with_what_happened() -> None:
    smoking = memory("Maya smokes about five cigarettes a day.", mid="smoke")
    [(op, target, content)] = ops_of("I quit smoking!", smoking)
    assert (op, target) == ("UPDATE", "smoke") and content and "quit smoking" in content


def test_finishing_closes_the_goal() -> None:
    rust = memory("Maya is trying to learn Rust on the side.", mid="rust")
    [(op, target, content)] = ops_of("I finished the Rust book.", rust)
    assert (op, target, content) == ("UPDATE", "rust", "Maya finished the Rust book.")


def test_a_switch_replaces_the_habit_it_changes() -> None:
    milk = memory("Maya always takes oat milk in their coffee.", kind=Kind.PREFERENCE, mid="milk")
    assert ops_of("I've switched to almond milk.", milk) == [
        ("UPDATE", "milk", "Maya has switched to almond milk.")
    ]


def test_a_new_job_in_its_own_clause_wins_over_the_ending_beside_it() -> None:
    barista = memory("Maya is a barista at a cafe downtown.", mid="job")
    ops = ops_of("I left the cafe, I work as a graphic designer now.", barista)
    # Both clauses touch the job: the new job title replaces it, the leaving is kept as an event.
    assert ops[0][:2] == ("ADD", None) and "left the cafe" in (ops[0][2] or "")
    assert ops[1] == ("UPDATE", "job", "Maya works as a graphic designer now.")


def test_a_plan_elsewhere_does_not_move_the_user_yet() -> None:
    home = memory("Maya lives in Bangalore.", mid="home")
    assert [op for op, _, _ in ops_of("I'm moving to Hyderabad next month.", home)] == ["ADD"]


def test_requests_hypotheticals_and_small_talk_are_not_memories() -> None:
    for said in (
        "Tell me a joke about cats.",
        "If I lived in Paris I would eat croissants.",
        "Hmm, let me think.",
    ):
        assert extractor.extract(msg(said), [], []) == [], said
    [op] = extractor.extract(msg("Book me a window seat, I always get airsick."), [], [])
    assert op.content == "Maya always gets airsick."


def test_news_about_a_known_plan_changes_it_even_in_the_third_person() -> None:
    offsite = memory("Maya's team offsite is in Lisbon in June.", kind=Kind.EVENT, mid="off")
    assert ops_of("The team offsite moved to Porto.", offsite) == [
        ("UPDATE", "off", "The team offsite moved to Porto.")
    ]


def test_summaries_of_consolidation_are_never_the_target_of_one_change() -> None:
    summary = memory("Maya smokes and drinks coffee and lives in Tokyo.", mid="sum")
    summary.metadata["consolidation"] = "summary"
    assert [op for op, _, _ in ops_of("I quit smoking.", summary)] == ["ADD"]


@pytest.mark.parametrize(
    ("known", "said"),
    [
        ("Maya has never written a Flask route.", "I implemented the login route in Flask for the admin."),
        ("Maya implemented the login route in Flask.", "I have never written a Flask route."),
        ("Maya owns a red car.", "I've never owned a car."),
    ],
)
def test_never_against_what_a_memory_says_happened_is_a_conflict_with_it(known: str, said: str) -> None:
    ops = extractor.extract(msg(said), [], [memory(known, mid="known")])
    assert [(o.op, o.target_id) for o in ops] == [("CONFLICT", "known")]
    assert ops[0].content and ops[0].content.startswith("Maya ")


@pytest.mark.parametrize(
    ("known", "said"),
    [
        # Negations that say something else than "it did not happen".
        ("Maya wants to set up the auth service correctly.", "I'm not sure how to set up the auth service."),
        (
            "Maya is having an art show with their paintings.",
            "I can't wait for the art show with my paintings.",
        ),
        # An idiom, and two statements that agree.
        ("Maya took a trip to Rome.", "I'll never forget the trip to Rome."),
        ("Maya recommends the game if you have never played the game.", "I played the game with friends."),
        ("Maya has never written a Flask route.", "I have never written a route in Flask."),
        # A change said as one is an update (tried first), and a new topic an addition.
        ("Maya doesn't drink coffee.", "I drink coffee now, every morning."),
        ("Maya has never written a Flask route.", "I play the trumpet in a brass band."),
    ],
)
def test_other_negations_idioms_agreement_changes_and_new_topics_are_no_conflict(
    known: str, said: str
) -> None:
    ops = extractor.extract(msg(said), [], [memory(known, mid="known")])
    assert "CONFLICT" not in [o.op for o in ops]


def _chat(content: str, asked: str, *, speaker: str | None = "Maya") -> list:
    question = Message(id="q1", role=Role.ASSISTANT, content=asked, timestamp=SAID)
    return extractor.extract(msg(content, speaker=speaker), [question], [])


def test_pasted_code_and_logs_are_no_memory_but_what_is_said_around_them_is() -> None:
    pasted = (
        "It crashes:\n```\nTraceback (most recent call last):\n  KeyError: 'id'\n```\nI deploy it on Fly.io."
    )
    ops = extractor.extract(msg(pasted), [], [])
    assert [o.content for o in ops] == ["Maya deploys it on Fly.io."]


def test_we_said_to_an_assistant_claims_no_family() -> None:
    to_assistant = _chat("We usually vote by show of hands.", "How do you decide?")
    assert [o.content for o in to_assistant] == ["Maya and others usually vote by show of hands."]
    at_work = _chat("We use Terraform for all our infrastructure.", "How do you manage infrastructure?")
    assert [o.content for o in at_work] == ["Maya's team use Terraform for all their infrastructure."]
    between_people = extractor.extract(msg("We went hiking in the Alps."), [], [])
    assert [o.content for o in between_people] == ["Maya and family went hiking in the Alps."]


def test_a_task_for_the_listener_is_no_memory() -> None:
    assert extractor.extract(msg("I need you to summarize the article about climate policy."), [], []) == []
    assert extractor.extract(msg("We'd like you to draft the release notes."), [], []) == []
    for asking in (
        "I was wondering if you could suggest a good name for my bakery.",
        "I'd appreciate it if you could review my cover letter.",
        "I'm looking for advice on how to structure my thesis chapters.",
        "I'd love some feedback on my resume.",
        "I want to know how to make my Postgres queries faster.",
    ):
        assert extractor.extract(msg(asking), [], []) == [], asking
    # A goal is no request.
    assert [o.content for o in extractor.extract(msg("I want to learn the guitar."), [], [])] == [
        "Maya wants to learn the guitar."
    ]
    kept = extractor.extract(msg("I need you to check my essay, I am applying to Leeds."), [], [])
    assert [o.content for o in kept] == ["Maya is applying to Leeds."]


def test_an_unnamed_users_own_users_are_their_end_users() -> None:
    ops = extractor.extract(msg("Our users complain that the dashboard is slow.", speaker=None), [], [])
    assert [o.content for o in ops] == ["The user's end users complain that the dashboard is slow."]


def test_a_gerund_answer_to_a_question_is_what_the_speaker_is_doing() -> None:
    ops = _chat("Mostly building pipelines in Python and Spark.", "What do you work on these days?")
    assert [o.content for o in ops] == ["Maya is mostly building pipelines in Python and Spark."]
    # A gerund that is the subject of its own verb is not an answer about the speaker.
    assert "Maya is building" not in str(_chat("Building pipelines is fun.", "What do you work on?"))
    # Not asked: nothing to complete it from.
    unasked = extractor.extract(msg("Mostly building pipelines in Python and Spark."), [], [])
    assert all(not (o.content or "").startswith("Maya is") for o in unasked)


def test_an_amount_changed_to_another_updates_the_memory_that_held_the_old_one() -> None:
    dose = memory("Maya takes 20mg of citalopram every morning.")
    ops = extractor.extract(msg("My doctor lowered my citalopram to 10mg last week."), [], [dose])
    assert [(o.op, o.target_id) for o in ops] == [("UPDATE", "mem1")]
    assert "10mg" in (ops[0].content or "")
    # Without a changed amount, nothing says the dose changed: a memory of its own.
    other = extractor.extract(msg("My doctor lowered her voice."), [], [dose])
    assert [o.op for o in other] != ["UPDATE"]
