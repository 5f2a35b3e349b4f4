"""The offline extractor's linguistic rules, one at a time: verb groups read from lemminflect's
forms, agent-noun job titles, polite memory commands, endings, pronoun and definite-noun
antecedents, durations, whose memory a speaker may change, and changes linked by meaning."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from memstack.adapters.llm.rules import cues
from memstack.adapters.llm.rules.attributes import find_attributes, present
from memstack.adapters.llm.rules.extractor import RuleExtractor
from memstack.adapters.llm.rules.grammar import alternation, forms
from memstack.adapters.llm.rules.rewrite import drop_duration, resolve_pronoun, with_antecedent
from memstack.adapters.llm.rules.targets import about_speaker
from memstack.models import Kind, MemoryRecord, Message, Role

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def msg(content: str, speaker: str = "Maya", role: Role = Role.USER, mid: str = "m1") -> Message:
    return Message(id=mid, role=role, speaker=speaker, content=content, timestamp=SAID)


def memory(content: str, kind: Kind = Kind.FACT, mid: str = "mem1") -> MemoryRecord:
    return MemoryRecord(id=mid, tenant="t", user_id="u", content=content, kind=kind)


# ---------------------------------------------------------------- verb groups and attributes
def test_verb_forms_come_from_the_inflection_tables() -> None:
    assert forms("give up", "VBD", "VBN") == ["given up", "gave up"]
    pattern = alternation("sell, quit", "VBD", "VBN")
    assert "sold" in pattern and "quit" in pattern and "sell" not in pattern.split("|")


@pytest.mark.parametrize(
    "text",
    [
        "Kim lives in Leeds.",
        "Kim is now living in Leeds.",
        "Kim has been living in Leeds.",
        "Kim has lived in Leeds.",
    ],
)
def test_every_present_form_of_a_state_is_a_residence(text: str) -> None:
    [found] = find_attributes(text, "Kim")
    assert (found.name, found.value) == ("residence", "Leeds")


@pytest.mark.parametrize("text", ["Kim lived in Leeds.", "Kim used to live in Leeds."])
def test_a_past_state_is_history_not_a_residence(text: str) -> None:
    assert find_attributes(text, "Kim") == []


def test_a_place_may_be_a_noun_phrase_that_ends_in_a_name() -> None:
    [found] = find_attributes("Samir lives in a small town outside Lyon.", "Samir")
    assert found.value == "a small town outside Lyon"


@pytest.mark.parametrize(
    ("group", "now"), [("has been living", "lives"), ("have lived", "live"), ("is working", "works")]
)
def test_a_perfect_or_progressive_state_is_restated_in_the_present(group: str, now: str) -> None:
    assert present(group) == now


def test_an_agent_noun_before_an_employer_is_a_job_title_a_kinship_noun_is_not() -> None:
    assert [a.value for a in find_attributes("Tara is a software tester at a games studio.", "Tara")] == [
        "software tester"
    ]
    assert find_attributes("Tara is a mother of two.", "Tara") == []
    assert find_attributes("Tara is a member of a choir.", "Tara") == []


def test_titles_keep_acronyms_and_stop_at_the_employer() -> None:
    [found] = find_attributes("Tara works as a QA lead at Sony.", "Tara")
    assert found.value == "QA lead"


# ---------------------------------------------------------------- memory commands
@pytest.mark.parametrize(
    ("said", "what"),
    [
        ("Could you delete my locker number?", "my locker number"),
        ("You can forget the gate code now.", "the gate code"),
        ("Please forget my old address, please.", "my old address"),
        ("Would you erase what I told you about my ex?", "my ex"),
    ],
)
def test_a_polite_request_to_forget_names_what(said: str, what: str) -> None:
    m = cues.FORGET.match(said)
    assert m is not None and m.group("rest") == what


@pytest.mark.parametrize("said", ["Forget it.", "Forget it, the weather is awful.", "I can't forget Rome."])
def test_never_mind_and_remembering_are_not_deletions(said: str) -> None:
    assert cues.FORGET.match(said) is None


def test_remember_drops_the_politeness_around_the_fact() -> None:
    m = cues.REMEMBER.match("Can you remember that I'm vegan, please?")
    assert m is not None and m.group("rest") == "I'm vegan"


# ---------------------------------------------------------------- endings and retractions
@pytest.mark.parametrize(
    ("said", "what"),
    [
        ("I've given up on the guitar.", "the guitar"),
        ("I finally ditched my gym membership.", "my gym membership"),
        ("I had to sell my car.", "my car"),
        ("We had to give Rex away.", "Rex"),
        ("I called the wedding off.", "the wedding"),
        ("The barbecue got cancelled.", "The barbecue"),
    ],
)
def test_endings_in_any_form_name_what_ended(said: str, what: str) -> None:
    found = cues.retraction(said)
    assert found is not None and found.ending and found.words == what


@pytest.mark.parametrize(
    "said", ["I stopped by the shop.", "I left for Rome on Friday.", "I'm leaving early."]
)
def test_a_verb_without_an_object_ends_nothing(said: str) -> None:
    assert cues.retraction(said) is None


def test_a_bare_not_anymore_is_a_retraction_of_what_was_asked() -> None:
    found = cues.retraction("No, not anymore.")
    assert found is not None and not found.ending and found.words == ""


def test_additive_too_ends_its_clause_degree_too_does_not_add() -> None:
    assert cues.ADDITION.search("I like climbing too.")
    assert not cues.ADDITION.search("Cycling got too dangerous.")


# ---------------------------------------------------------------- antecedents and durations
@pytest.mark.parametrize(
    ("previous", "sentence", "resolved"),
    [
        ("I got a kitten on Sunday.", "She's called Mochi.", "My kitten is called Mochi."),
        ("I had lunch with Priya.", "She's moving to Leeds.", "Priya is moving to Leeds."),
        ("I bought a new bike.", "It's bright red.", "My new bike is bright red."),
        # "it" after something told is usually that happening: left alone
        ("I went to Paris with my mum.", "It was lovely.", "It was lovely."),
        ("The weather is nice.", "It's sunny.", "It's sunny."),
    ],
)
def test_an_opening_pronoun_is_read_as_what_the_speaker_just_named(
    previous: str, sentence: str, resolved: str
) -> None:
    assert resolve_pronoun(sentence, previous) == resolved


def test_a_definite_noun_takes_its_description_from_the_memory() -> None:
    known = "Kai is going to a concert in Leeds on Saturday."
    assert (
        with_antecedent("The concert was called off.", known, "Kai")
        == "Kai's concert in Leeds on Saturday was called off."
    )
    assert with_antecedent("The meeting moved.", known, "Kai") == "The meeting moved."


def test_how_long_the_old_value_held_is_dropped_and_nothing_after_it() -> None:
    assert drop_duration(" since university, with a cat") == ", with a cat"
    assert drop_duration(" for six years and loves it") == " and loves it"
    assert drop_duration(" for a bank") == " for a bank"


def test_a_replaced_perfect_state_is_restated_without_its_duration() -> None:
    old = memory("Rhea has lived in Glasgow since university.")
    ops = RuleExtractor().extract(msg("I'm now living in Edinburgh.", "Rhea"), [], [old])
    assert [(o.op, o.target_id) for o in ops] == [("UPDATE", "mem1")]
    assert ops[0].content == "Rhea lives in Edinburgh."


# ---------------------------------------------------------------- whose memory
def test_a_speaker_changes_only_memories_about_themselves_or_no_one_else() -> None:
    assert about_speaker(memory("Caroline loves swimming."), "Caroline")
    assert about_speaker(memory("The concert was called off."), "Caroline")
    assert not about_speaker(memory("Melanie loves swimming."), "Caroline")
    ops = RuleExtractor().extract(
        msg("I've switched to running now.", "Caroline"), [], [memory("Melanie loves swimming.")]
    )
    assert [o.op for o in ops] == ["ADD"]


def test_i_sold_it_ends_what_the_speaker_last_talked_about() -> None:
    owns = memory("Gus owns a motorbike.")
    context = [msg("I own a motorbike.", "Gus", mid="m0")]
    ops = RuleExtractor().extract(msg("I sold it last month.", "Gus"), context, [owns])
    assert [(o.op, o.target_id) for o in ops] == [("UPDATE", "mem1")]


# ---------------------------------------------------------------- changes linked by meaning
class _Vectors:
    """An embedder with fixed unit vectors per text (anything else is orthogonal to them all)."""

    dim = 3
    name = "fixed"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = np.asarray([self.table.get(t, [0.0, 0.0, 1.0]) for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize(("cosine", "op"), [(0.9, "UPDATE"), (0.3, "ADD")])
def test_a_change_no_word_links_replaces_the_memory_closest_in_meaning_when_close_enough(
    cosine: float, op: str
) -> None:
    # Both texts are embedded with the subject's name neutralised.
    embedder = _Vectors(
        {
            "the user is a night owl.": [1.0, 0.0, 0.0],
            "the user has become a morning person.": [cosine, float(np.sqrt(1 - cosine**2)), 0.0],
        }
    )
    extractor = RuleExtractor(embedder)
    ops = extractor.extract(msg("I've become a morning person."), [], [memory("Maya is a night owl.")])
    assert [o.op for o in ops] == [op]
    # Without an embedder nothing links them.
    assert [
        o.op
        for o in RuleExtractor().extract(
            msg("I've become a morning person."), [], [memory("Maya is a night owl.")]
        )
    ] == ["ADD"]


def test_a_polite_question_may_put_the_command_in_the_gerund() -> None:
    m = cues.FORGET.match("Would you mind forgetting my bike lock code?")
    assert m is not None and m.group("rest") == "my bike lock code"
    assert cues.FORGET.match("Remove the onions from the recipe.") is None


def test_news_about_a_known_thing_named_by_a_definite_noun_updates_it() -> None:
    party = memory("Gil is throwing a party for their dad on Friday.", Kind.EVENT)
    ops = RuleExtractor().extract(msg("The party got postponed to next month.", "Gil"), [], [party])
    assert [(o.op, o.target_id) for o in ops] == [("UPDATE", "mem1")]
    assert "postponed" in ops[0].content
    # The same news about a thing no memory names is small talk.
    assert RuleExtractor().extract(msg("The bus got delayed again.", "Gil"), [], [party]) == []


def test_remove_is_a_memory_command_only_when_its_object_is_the_memory() -> None:
    m = cues.FORGET.match("Please remove the note about penicillin, the test was wrong.")
    assert m is not None and m.group("rest") == "penicillin"
    assert cues.FORGET.match("Please remove the onions from the recipe.") is None


@pytest.mark.parametrize(
    ("said", "what"),
    [
        ("I've pulled out of the marathon.", "the marathon"),
        ("I dropped out of the course.", "the course"),
        ("We backed out of the house purchase.", "the house purchase"),
    ],
)
def test_phrasal_endings_name_what_ended_without_their_particles(said: str, what: str) -> None:
    found = cues.retraction(said)
    assert found is not None and found.words == what
