"""The rule-based extractor (``MEMSTACK_LLM=local``): deterministic, no network (the offline default).

For each sentence (and each first-person clause of it) of a user's message it
decides, against the most similar current memories (the neighbours):

- a memory command: "remember that X" is X; "forget (that) X" DELETEs X;
- a correction ("sorry, I meant Hannah, not Anna") UPDATEs the memory it corrects;
- a new value for an attribute already known ("I moved to Osaka" when a memory
  says "lives in Tokyo"; a new job, employer, favourite, preference between two
  things) UPDATEs that memory;
- a retraction ("I don't have a dog anymore", "X isn't for me anymore") DELETEs
  the memory it takes back; an ending ("I quit smoking", "we cancelled the
  trip") UPDATEs it to what happened;
- progress that closes a goal ("finished the Rust book" after "trying to learn
  Rust") UPDATEs the goal; a change of plan or habit ("switched to almond milk",
  "we're going to Greece instead") UPDATEs the plan or habit it changes;
- "never" said of what a memory says happened, or the other way round, with no word that
  it changed ("I have never written a Flask route" beside "implemented the login route in
  Flask") -> CONFLICT: both kept, linked, for the agent to ask;
- a restatement of something known -> NONE;
- anything else worth keeping -> ADD, with a kind (likes/dislikes/prefer are
  preferences, dated or past happenings are events, the rest facts) and a
  category from the keyword lexicon.

When two decisions of one message touch the same memory, the more specific
wins (an attribute update over an ending: "I left the cafe and now I work as
a designer" updates the job, and the leaving is kept as its own event).
Assistant, system and tool turns, questions, requests to the assistant,
hypotheticals and small talk produce nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstack.adapters.llm.rules import answers, cues, pasted
from memstack.adapters.llm.rules.clauses import clause, drop_announcements
from memstack.adapters.llm.rules.corrections import correction
from memstack.adapters.llm.rules.decisions import retract
from memstack.adapters.llm.rules.mentions import question_subject, resolve_it, resolve_opening
from memstack.adapters.llm.rules.rewrite import is_first_person, resolve_pronoun, subject_name
from memstack.adapters.llm.rules.sentences import split_sentences, strip_lead, without_question
from memstack.adapters.llm.rules.targets import about_speaker
from memstack.adapters.llm.rules.turn import LINK_SIMILARITY, Turn, resolve
from memstack.domain.categories import lexicon_for
from memstack.domain.text import words
from memstack.models import MemoryRecord, Message, Role
from memstack.ports.embedder import Embedder
from memstack.ports.llm import DEFAULT_GUIDANCE, ExtractionOp, Guidance

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from memstack.settings import Settings

# What the speaker said in their last few turns is where "we", "her" and "there" are looked up.
_OWN_TURNS = 3


class RuleExtractor:
    """Rule-based ``Extractor``: same input, same operations, on any machine."""

    name = "local"

    def __init__(self, embedder: Embedder | None = None, link_similarity: float = LINK_SIMILARITY) -> None:
        #: when words link a change to no memory, the memory closest in meaning, if this close
        self.embedder = embedder
        self.link_similarity = link_similarity

    def extract(
        self,
        message: Message,
        context: list[Message],
        neighbours: list[MemoryRecord],
        guidance: Guidance = DEFAULT_GUIDANCE,
    ) -> list[ExtractionOp]:
        """``guidance``: its categories file the memories (its instructions are for models: the
        tenant's ignore / only rules hold every extractor's result, ``domain.tenant.rules``)."""
        if message.role != Role.USER:
            return []
        subject = subject_name(message.speaker)
        own = [n for n in neighbours if about_speaker(n, subject)]
        turn = Turn(
            message,
            subject,
            self.listener(message, context),
            own,
            lexicon_for(guidance),
            embedder=self.embedder,
            link_similarity=self.link_similarity,
        )
        turn.household = subject != "The user" and not any(c.role == Role.ASSISTANT for c in context)
        if context and context[-1].speaker != message.speaker:
            turn.asked = context[-1].content.rstrip().endswith("?")
        turn.before = [m.content for m in reversed(context)]
        turn.own_before = [
            m.content for m in reversed(context) if m.role == Role.USER and m.speaker == message.speaker
        ][:_OWN_TURNS]
        question = (
            answers.question_of(context[-1].content)
            if context and context[-1].speaker != message.speaker
            else None
        )
        if question:
            # "Where is she going?" after "My daughter is starting university": about the daughter.
            question = question_subject(question, turn.recent(), (subject, turn.listener or ""))
            # "How's your brother doing?" - "Good! He just moved to Lyon.": what the question asks
            # about is the speaker's, said newer than their own earlier turns.
            turn.own_before.insert(0, answers.as_speaker(question))
        previous = ""
        for sentence in split_sentences(pasted.prose(message.content)):
            if question and not previous and (answer := answers.complete(question, sentence)):
                sentence = answer  # "Where are you based?" - "Just outside Utrecht."
            turn.mentioned = None
            _sentence(_resolved(sentence, previous, turn), turn)
            turn.before.insert(0, sentence)
            turn.own_before.insert(0, sentence)
            previous = sentence
        return resolve(turn.decisions)

    @staticmethod
    def listener(message: Message, context: list[Message]) -> str | None:
        """Who "you" is: the other person in the conversation, when a previous turn names them;
        in a chat with an assistant, the assistant ("the index you suggested")."""
        for turn in reversed(context):
            if turn.role == Role.USER and turn.speaker and turn.speaker != message.speaker:
                return turn.speaker
        to_assistant = any(turn.role == Role.ASSISTANT for turn in context)
        if to_assistant or subject_name(message.speaker) == "The user":
            return "the assistant"
        return None


def _resolved(sentence: str, previous: str, turn: Turn) -> str:
    """The sentence with an opening pronoun read as what it means: the thing or person of the
    sentence before ("I adopted a greyhound. She's called Pepper."), else the last person the
    speaker named, this message or their last turns ("... She starts at Edinburgh in September.")."""
    speakers = (turn.subject, turn.listener or "")
    stripped = strip_lead(sentence)
    lead = sentence[: len(sentence) - len(stripped)]
    # A person named in the sentence before, then a thing of the speaker's there, then anyone before.
    if (
        previous
        and (person := resolve_opening(stripped, [strip_lead(previous)], speakers, people_only=True))
        != stripped
    ):
        resolved = person
    elif previous and (thing := resolve_pronoun(sentence, strip_lead(previous))) != sentence:
        return thing
    else:
        resolved = resolve_opening(stripped, turn.recent(), speakers)
    if resolved == stripped:
        # "It" as the speaker's thing named a few sentences back; an "it" inside the sentence only
        # when no memory was just made that the sentence could say more about (``clauses``).
        return lead + resolve_it(stripped, turn.recent(), opening_only=turn.last is not None)
    turn.mentioned = resolved[: len(resolved) - len(stripped.split(" ", 1)[-1])].split("'")[0].strip()
    return lead + resolved


def _sentence(raw: str, turn: Turn) -> None:
    sentence = without_question(strip_lead(raw))
    # Memory commands first: "could you forget my old address?" is a request, not a question.
    if m := cues.FORGET.match(sentence):
        retract(m.group("rest"), ending=False, turn=turn, said=None)
        return
    if m := cues.REMEMBER.match(sentence):
        sentence = m.group("rest")[:1].upper() + m.group("rest")[1:]
        sentence += "" if sentence[-1:] in ".!" else "."
    if (
        sentence.endswith("?")
        or cues.SMALL_TALK.match(sentence)
        or cues.HYPOTHETICAL.match(sentence)  # the whole conditional, both its clauses
        or len(words(sentence)) < 2
    ):
        return
    if len(words(sentence)) < 3 and not is_first_person(sentence):
        return
    if cues.CORRECTION.search(raw) and correction(sentence, turn):
        return
    before = len(turn.decisions)
    turn.clauses_before = []
    parts = cues.clauses(sentence)
    turn.whole_sentence = len(parts) == 1
    for part in parts:
        clause(part, raw, turn)
        turn.clauses_before.insert(0, part)
    drop_announcements(turn, before)


def build(settings: Settings, clients: Mapping[str, Any], embedder: Embedder | None) -> RuleExtractor:
    """``MEMSTACK_LLM=local``: changes linked by meaning with ``embedder`` (``factory.EXTRACTORS``)."""
    return RuleExtractor(embedder)
