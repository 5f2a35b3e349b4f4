"""Memories that state facts: every one dated, days without a year, "we" to an assistant, requests."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.time.relative import resolve_relative_dates, yearless_date
from memstack.models import MemoryFilters, Message, Role, Tier
from memstack.service import MemoryService

MARCH = datetime(2024, 3, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "day"),
    [
        ("I'll be in Lisbon between April 5 and May 2.", datetime(2024, 4, 5, tzinfo=UTC)),
        ("From July 10 to July 24 I'm on leave.", datetime(2024, 7, 10, tzinfo=UTC)),
        ("I will speak at the conference from 14 to 16 October.", datetime(2024, 10, 14, tzinfo=UTC)),
        ("On February 20th I gave a talk.", datetime(2024, 2, 20, tzinfo=UTC)),
        ("Back home on December 28.", datetime(2023, 12, 28, tzinfo=UTC)),  # nearer than next December
    ],
)
def test_a_day_without_a_year_is_the_event_time_in_the_nearest_year(text: str, day: datetime) -> None:
    assert resolve_relative_dates(text, MARCH).event_time == day


@pytest.mark.parametrize("text", ["I may 5 times a day say so.", "Meet me at 5 may.", "The run was 10.5 km."])
def test_no_day_is_read_where_none_is_named(text: str) -> None:
    assert yearless_date(text, MARCH) is None


def test_a_date_with_its_year_or_a_relative_phrase_comes_first() -> None:
    assert resolve_relative_dates("On 3 May 2022 and April 5 we met.", MARCH).event_time == datetime(
        2022, 5, 3, tzinfo=UTC
    )
    said = resolve_relative_dates("Yesterday, not April 5.", MARCH)
    assert said.event_time == datetime(2024, 2, 29, tzinfo=UTC)


def test_every_extracted_memory_carries_an_event_time(service: MemoryService) -> None:
    said = [
        Message(id="m1", speaker="Zoe", content="I live in Ghent.", timestamp=MARCH),
        Message(id="m2", speaker="Zoe", content="I really like jazz piano.", timestamp=MARCH),
        Message(
            id="m3", speaker="Zoe", content="I'll be in Lisbon between April 5 and May 2.", timestamp=MARCH
        ),
    ]
    service.add("t", "zoe", said, sync=True)
    records, _ = service.store.list("t", "zoe", MemoryFilters(tier=Tier.LTM), 50)
    times = {r.content: r.event_time for r in records}
    assert len(times) == 3 and all(times.values())
    assert times["Zoe lives in Ghent."] == MARCH  # what it is about is not dated: its turn's time
    [lisbon] = [t for c, t in times.items() if "Lisbon" in c]
    assert lisbon == datetime(2024, 4, 5, tzinfo=UTC)
    hits = service.search(
        SearchRequest(
            tenant="t", user_id="zoe", query="what does Zoe like", filters=MemoryFilters(tier=Tier.LTM)
        )
    ).hits
    assert hits  # dated memories are still found without a time in the query


extractor = RuleExtractor()


def _said(content: str, speaker: str | None = None) -> list[str]:
    message = Message(id="m1", role=Role.USER, speaker=speaker, content=content, timestamp=MARCH)
    return [op.content or "" for op in extractor.extract(message, [], [])]


def test_we_said_to_an_assistant_claims_no_family() -> None:
    [memory] = _said("We deploy to production every Friday afternoon.")
    assert memory == "The user and others deploy to production every Friday afternoon."
    [named] = _said("We moved to Osaka last spring.", speaker="Maya")
    assert named.startswith("Maya and family moved to Osaka")  # two people chatting: the household


@pytest.mark.parametrize(
    "request_",
    [
        "Please explain how a B-tree differs from a binary search tree.",
        "Would you review my plan for the migration?",
        "Can you please help me with the cover letter.",
        "Explain why the build is slow.",
    ],
)
def test_a_task_for_the_assistant_is_no_memory(request_: str) -> None:
    assert _said(request_) == []


def test_a_fact_beside_a_request_is_kept() -> None:
    assert _said("I teach chemistry at a school. Could you suggest a demo for my class?") == [
        "The user teaches chemistry at a school."
    ]


def test_an_opening_word_before_a_clause_is_not_a_person_the_user_did_it_with() -> None:
    said = _said("Right now, I'm between jobs. However, I'm not sure I want to go back to banking.")
    assert said == [
        "Right now, the user is between jobs.",
        "The user is not sure the user wants to go back to banking.",
    ]
    assert _said("Leo and I broke up.", speaker="Maya") == ["Leo and Maya broke up."]


def test_a_short_first_person_clause_is_a_memory_of_its_own() -> None:
    # Two facts joined by "and": each its own memory, so an update of one ("and tree nuts")
    # replaces nothing of the other. A piece without a verb of its own still opens its clause.
    assert _said("I'm vegetarian and I'm allergic to peanuts.") == [
        "The user is vegetarian.",
        "The user is allergic to peanuts.",
    ]
    assert _said("Leo and I broke up and I moved out.", speaker="Maya") == [
        "Leo and Maya broke up.",
        "Maya moved out.",
    ]


def test_you_said_to_an_assistant_is_the_assistant() -> None:
    [memory] = _said("I tried the index you suggested and the report query got much faster.")
    assert memory == "The user tried the index the assistant suggested and the report query got much faster."


def _chat_turns(*turns: tuple[Role, str]) -> list[str]:
    """What the last of ``turns`` (a user's) makes, the others its context."""
    messages = [
        Message(
            id=f"m{i}",
            role=role,
            speaker="user" if role == Role.USER else "assistant",
            content=text,
            timestamp=MARCH,
        )
        for i, (role, text) in enumerate(turns)
    ]
    return [op.content or "" for op in extractor.extract(messages[-1], messages[:-1], [])]


def test_we_is_the_couple_the_team_or_the_household_the_speaker_named() -> None:
    couple = _said("My husband and I are renovating an old farmhouse. We bought it in 2023.")
    # "bought it" points back to the farmhouse: one memory (test_a_clause_that_points_back_...).
    assert couple == [
        "The user and the user's husband are renovating an old farmhouse; "
        "the user and the user's husband bought it in 2023."
    ]
    assert _said("At work we deploy everything with Argo CD.") == [
        "At work the user's team deploy everything with Argo CD."
    ]
    team = _chat_turns(
        (Role.USER, "Our team moved from Jenkins to GitHub Actions."),
        (Role.ASSISTANT, "How did it go?"),
        (Role.USER, "We still keep one Jenkins box for the legacy builds."),
    )
    assert team == ["The user's team still keep one Jenkins box for the legacy builds."]
    # What a household does is not the team's, whatever was said about work before.
    home = _chat_turns((Role.USER, "My team is fully remote."), (Role.USER, "We moved to Osaka."))
    assert home == ["The user's household moved to Osaka."]  # no family claimed, no "others"


@pytest.mark.parametrize(
    ("asked", "answer", "memory"),
    [
        (
            "What do you work on day to day?",
            "Mostly reconciliation jobs in Scala.",
            "The user works on mostly reconciliation jobs in Scala day to day.",
        ),
        (
            "Good question. Where are you based, so I can suggest meetups?",
            "Just outside Utrecht.",
            "The user is based just outside Utrecht.",
        ),
        (
            "How long have you been teaching yourself piano?",
            "About four years.",
            "The user has been teaching themselves piano for about four years.",
        ),
        (
            "Do you have any pets?",
            "Two rabbits, Biscuit and Clover.",
            "The user has two rabbits, Biscuit and Clover.",
        ),
        (
            "What's your go-to breakfast?",
            "Oats with banana.",
            "The user's go-to breakfast is oats with banana.",
        ),
        (
            "Are you still on the night shift?",
            "Yes, four nights a week.",
            "The user is still on the night shift, four nights a week.",
        ),
        (
            "Do you still live in Bristol?",
            "No, moved to Cardiff in March.",
            "The user moved to Cardiff in March 2024.",
        ),
    ],
)
def test_an_answer_without_a_subject_is_completed_from_the_question(
    asked: str, answer: str, memory: str
) -> None:
    assert _chat_turns((Role.ASSISTANT, asked), (Role.USER, answer)) == [memory]


def test_an_answer_with_its_own_subject_or_about_it_says_what_it_says() -> None:
    assert _chat_turns((Role.ASSISTANT, "Who runs the backend?"), (Role.USER, "Kenji handles that.")) == []
    assert _chat_turns((Role.ASSISTANT, "Do you enjoy it?"), (Role.USER, "Yeah, most days.")) == []


def test_her_him_and_there_are_the_person_and_place_named_before() -> None:
    said = _said("My sister Aiko visits from Vancouver in July. We want to take her to Nara.", speaker="Maya")
    assert said[1] == "Maya and family want to take Maya's sister Aiko to Nara."
    flying = _said("My brother moved to Auckland last year. I'm flying out there in December.")
    assert flying[1] == "The user is flying out to Auckland in December 2024."
    across_turns = _chat_turns(
        (Role.USER, "I spent two summers working in Lisbon."),
        (Role.ASSISTANT, "Lovely city."),
        (Role.USER, "I still go back there every year."),
    )
    assert across_turns == ["The user still goes back to Lisbon every year."]
    # The place named earlier in the same sentence is nearer than one named in an earlier sentence.
    same_sentence = _said("I grew up in Denver. My next away game is in Seattle, I'm stoked to play there.")
    assert same_sentence[-1] == "The user is stoked to play in Seattle."
    # A clause that names whom it means keeps its pronoun; "there is" is no place.
    assert _said("My mum loves her garden.", speaker="Maya") == ["Maya's mum loves her garden."]


def test_her_and_him_are_a_bare_name_or_the_person_of_their_gender() -> None:
    # A name with no person word: "Ana", "with Greta", "Kofi and I".
    assert _said("Ana is coming to stay in October. I'm going to take her to the Alhambra.")[-1] == (
        "The user is going to take Ana to the Alhambra."
    )
    assert _said("I had lunch with Greta. I'm hiring her as a contractor.", speaker="Jonas")[-1] == (
        "Jonas is hiring Greta as a contractor."
    )
    assert _said("Kofi and I met at college. I'm the best man at his wedding.")[-1] == (
        "The user is the best man at Kofi's wedding."
    )
    # The person of the pronoun's gender before one with none; "-in-law" keeps its word.
    seeing = _said("My brother Idris and my cousin Sara live in Leeds. I'm seeing him on Sunday.")
    assert seeing[-1].startswith("The user is seeing the user's brother Idris on")
    assert _said("My mother-in-law moved in downstairs. I drive her to the clinic.")[-1] == (
        "The user drives the user's mother-in-law to the clinic."
    )
    # "take her hiking" is whom, not whose; "at Lake Bled" is a place "there" can be.
    assert _said("My friend Noor is visiting. I want to take her hiking.")[-1] == (
        "The user wants to take the user's friend Noor hiking."
    )
    assert _said("We spent a week at Lake Bled. I'd love to go back there.")[-1] == (
        "The user would love to go back to Lake Bled."
    )
    # Not the people in the chat, and not when the clause has its own "he".
    assert _said("Lena just got a job at Spotify. I'm so proud of her.", speaker="Maya")[-1] == (
        "Maya is so proud of Lena."
    )
    assert _said("My dog Rex is naughty. He hid his bone in my shoe.", speaker="Maya")[-1] == (
        "Maya's dog Rex hid his bone in Maya's shoe."
    )


def test_an_elaboration_stays_with_what_it_elaborates() -> None:
    assert _said("I'm allergic to peanuts, I found out the hard way at a street food stall.", "Maya") == [
        "Maya is allergic to peanuts; Maya found out the hard way at a street food stall."
    ]
    assert _said("I'm allergic to shellfish. Learned that the hard way in Busan.", "Maya") == [
        "Maya is allergic to shellfish; Maya learned that the hard way in Busan."
    ]
    assert _said("I play the oud. It was my grandfather's.", "Omar") == [
        "Omar plays the oud; it was Omar's grandfather's."
    ]
    # With nothing before it to join, it is no memory of its own.
    assert _said("Found out the hard way at a street food stall.", "Maya") == []


def test_them_is_the_speakers_people_when_they_are_the_last_plural_named() -> None:
    assert _said("My parents are visiting in May. I'm taking them to Sintra.")[-1] == (
        "The user is taking the user's parents to Sintra."
    )
    assert _said("My in-laws moved to Porto, I visit them twice a year.")[-1] == (
        "The user visits the user's in-laws twice a year."
    )
    # The last plural named is a thing: "them" is the tickets, and stays as it is.
    assert _said("My parents gave me two tickets. I'm using them on Friday.")[-1].startswith(
        "The user is using them on"
    )


def test_an_answer_whose_own_subject_has_a_verb_is_no_fragment() -> None:
    assert _chat_turns(
        (Role.ASSISTANT, "What are you running?"),
        (Role.USER, "Our pods keep restarting."),
    ) == ["The user's pods keep restarting."]


def test_other_wordings_of_an_elaboration_stay_with_what_they_elaborate() -> None:
    assert _said("I stopped drinking coffee after lunch. Turned out it was wrecking my sleep.") == [
        "The user stopped drinking coffee after lunch; it was wrecking the user's sleep."
    ]
    assert _said("I'm learning Korean. Mostly so I can talk to my in-laws.", "Lin") == [
        "Lin is learning Korean; mostly so Lin can talk to Lin's in-laws."
    ]
    assert _said("I'm allergic to cats. I found that out when I adopted one.")[0].startswith(
        "The user is allergic to cats; the user found that out"
    )
    assert _said("I quit the band. Best decision I ever made.") == [
        "The user quit the band; best decision the user ever made."
    ]
    assert _said("I've switched to decaf, my cardiologist told me to after a scare.") == [
        "The user has switched to decaf; the user's cardiologist told the user to after a scare."
    ]


def test_a_clause_that_points_back_joins_the_memory_it_points_to() -> None:
    assert _said("I run a ceramics studio. I set it up with my savings in 2020.", "Marta") == [
        "Marta runs a ceramics studio; Marta set it up with Marta's savings in 2020."
    ]
    assert _said("I got a fox tattooed on my wrist, my sister drew the design for it.") == [
        "The user got a fox tattooed on the user's wrist; the user's sister drew the design for it."
    ]
    assert _said("I chose Loki. My manager Priya signed off on it.") == [
        "The user chose Loki; the user's manager Priya signed off on it."
    ]
    # Words for the listener point back too, and make no memory: "keep it up!".
    assert _said("I finished my first marathon. Keep it up, you said!") == [
        "The user finished the user's first marathon."
    ]
    # With nothing before it, a clause that points back is a memory of its own.
    assert _said("I set it up with my savings in 2020.") == [
        "The user set it up with the user's savings in 2020."
    ]


def test_a_technical_chat_keeps_what_the_user_works_with() -> None:
    # A question after the statement, or a request, is not part of the memory.
    assert _chat_turns(
        (Role.ASSISTANT, "The entry API has been stable for years."),
        (Role.USER, "We're still on Rust 1.75 because of a toolchain pin at work, would that matter?"),
    ) == ["The user's team are still on Rust 1.75 because of a toolchain pin at work."]
    assert _chat_turns(
        (Role.ASSISTANT, "Sure."),
        (Role.USER, "I deploy the API on Render with Docker, can you help me set up health checks?"),
    ) == ["The user deploys the API on Render with Docker."]
    # "The cluster is ...", said to an assistant, is the user's; "our clusters" are the team's.
    assert _chat_turns(
        (Role.ASSISTANT, "Let us look at the restarts."),
        (Role.USER, "Our pods keep restarting. The cluster is EKS 1.29 with 30 nodes."),
    ) == ["The user's pods keep restarting.", "The user's cluster is EKS 1.29 with 30 nodes."]
    # A compound question is answered by its first part; "Spring" is no gerund.
    assert _chat_turns(
        (Role.ASSISTANT, "Which runtime is the service on, and what are its limits?"),
        (Role.USER, "Spring Boot 3 on Java 21."),
    ) == ["The user's service is on Spring Boot 3 on Java 21."]
    # "It's a ..." after "Our CI ...": the thing the speaker named, not a clause of the first.
    assert _said("Our CI takes 14 minutes. It's a pnpm monorepo on GitHub Actions.") == [
        "The user's team's CI takes 14 minutes.",
        "The user's CI is a pnpm monorepo on GitHub Actions.",
    ]


def _after(known: str, content: str, speaker: str = "Kai") -> list[tuple[str, str | None, str]]:
    """The operations ``content`` makes beside a memory ``known`` (an event, as a past start is)."""
    from memstack.models import Kind, MemoryRecord

    memory = MemoryRecord(
        id="known", tenant="t", user_id="u", content=known, kind=Kind.EVENT, event_time=MARCH
    )
    message = Message(id="m2", role=Role.USER, speaker=speaker, content=content, timestamp=MARCH)
    return [(op.op, op.target_id, op.content or "") for op in extractor.extract(message, [], [memory])]


@pytest.mark.parametrize(
    ("known", "said"),
    [
        (
            "Kai started out as a line cook at a hotel in Bergen.",
            "These days I run the kitchen as head chef.",
        ),
        ("Kai joined Tessera as a support engineer in 2019.", "I'm the engineering manager for billing now."),
        ("Kai started as a junior analyst.", "Got bumped up to senior analyst last month."),
    ],
)
def test_a_new_role_supersedes_the_role_a_career_started_in(known: str, said: str) -> None:
    [(op, target, _content)] = _after(known, said)
    assert (op, target) == ("UPDATE", "known")
