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

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from memstack.adapters.llm.rules import answers, cues, grammar, pasted
from memstack.adapters.llm.rules.attributes import AttributeValue, find_attributes, present, same_value
from memstack.adapters.llm.rules.refs import resolve_references
from memstack.adapters.llm.rules.rewrite import (
    definite_subject,
    drop_duration,
    is_first_person,
    resolve_pronoun,
    subject_name,
    to_third_person,
    with_antecedent,
)
from memstack.adapters.llm.rules.targets import (
    about_speaker,
    best_target,
    editable,
    most_similar,
    named_in,
    same_category_preference,
    topic,
)
from memstack.adapters.llm.rules.we import we_from
from memstack.domain.categories import Lexicon, categorise, lexicon_for
from memstack.domain.text import STOPWORDS, words
from memstack.domain.time.relative import is_future, resolve_relative_dates
from memstack.models import Category, Kind, MemoryRecord, Message, Role
from memstack.ports.embedder import Embedder
from memstack.ports.llm import DEFAULT_GUIDANCE, ExtractionOp, Guidance, OpName

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from memstack.settings import Settings

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(
    r"^(?:(?:hi|hello|hey|yes|yeah|yep|no|nope|well|so|oh|ok|okay|actually|anyway|btw|by the way|ah|haha|"
    r"lol|wow|also|and|but|plus|honestly|sure|sorry|oops|correction|no wait|wait|hmm|sadly|luckily|however|"
    r"fine|alright|all right|unfortunately|fortunately|to be honest|tbh|that said|anyways|"
    r"my mistake|my bad|change of plans?|big news|good news|great news|bad news|news|just a reminder|"
    r"reminder|turns out|guess what|fun fact|update|in fact)\b[,!.:]?\s*"
    r"|[\w' ]{1,24}:\s+|[\w-]+-wise,\s*)",
    re.IGNORECASE,
)
# Preferences are the user's own: "I (really) love ...", "my favourite ...", "please don't ...".
_PREFERENCE = re.compile(
    r"\b(?:I|we)(?:\s+(?:really|also|just|still|absolutely|totally|do|don't|do not|\w+ly))*\s+"
    r"(?:like|love|enjoy|prefer|hate|dislike|adore|can't stand|cannot stand|am a fan of|'m a fan of)\b"
    r"|\b(?:my|our) (?:all-time )?favou?rite\b|\bplease (?:don't|do not|always|never|use|keep|avoid|answer|"
    r"reply|respond|write|talk|call)\b|\b(?:I'm|I am) (?:a )?(?:big )?fan of\b|\bwork(?:s)? better for me\b",
    re.IGNORECASE,
)
_NOT_PREFERENCE = re.compile(
    r"\b(?:would|'d) (?:like|love) to\b|\blooks like\b|\bfeels like\b", re.IGNORECASE
)
_FIRST_VERB = re.compile(
    r"\b(?:I|we)(?P<perfect>'ve| have)?(?:\s+(?:just|finally|already|also|recently|\w+ly))*"
    r"\s+(?P<verb>[a-z']+)",
    re.IGNORECASE,
)
# "I've lived here since 2019", "we've worked there for six years": a perfect that lasts is a state.
_LASTING = re.compile(
    r"\b(?:since|for (?:\w+ )?(?:years?|months?|weeks?|decades?|ages|a while|a long time|long))\b"
    r"|\b(?:all my life|ever since)\b",
    re.IGNORECASE,
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'll|you'd)\b", re.IGNORECASE)
_INSTRUCTION = re.compile(r"^(?:please|always|never|don't|do not|avoid|stop)\b", re.IGNORECASE)
_NAME = re.compile(r"(?i:I'm|I am|my name is|call me)\s+([A-Z][\w-]*)[.!]?")
# A sentence about neither speaker must speak clearly to some category to be worth keeping.
_MIN_TOPIC_SCORE = 2.0
RESTATEMENT_OVERLAP = 0.7

# A change links to the memory closest in meaning when no word links them (see _closest_in_meaning):
# at the default embedder's cosine 0.6 (pairs that are not a change reached 0.53 in our checks), or 0.1
# less when the keyword categories of both agree, two weak signals pointing the same way.
LINK_SIMILARITY = 0.6
_AGREEING_CATEGORY_ALLOWANCE = 0.1
# The clause's subject is the speaker ("I", "we"): not "my friend Jake just moved to Denver".
_SPEAKER_SUBJECT = re.compile(r"\b(?:I|we)\b", re.IGNORECASE)

# A verb that makes a leading gerund the subject of its own clause ("Building pipelines is fun").
_FINITE = re.compile(
    r"\b(?:is|are|was|were|has|have|had|does|do|did|will|would|can|could|should|makes?|keeps?|takes?)\b",
    re.IGNORECASE,
)

# "I sold it last month", "I gave them away": the object is a pronoun.
_PRONOUN_OBJECT = re.compile(r"^(?:it|them|that|this|those|these|one|him|her)\b", re.IGNORECASE)

# What only says more about the clause before it: "(I) found out the hard way at a street food
# stall", "It was my grandfather's", "which is why ...". It joins that clause's memory.
_ELABORATION = re.compile(
    r"^(?:(?:I|we)\s+)?(?:found out|learned|learnt|discovered|realised|realized|figured (?:it|that) out)"
    r"(?:\s+(?:that|it|this))?(?=\s*(?:[,.;!]|$)|\s+(?:the hard way|when|after|at|in|on|during|from|last|"
    r"years?|early|quickly|back|recently|while|because)\b)"
    r"|^(?:that|this|it)(?:'s|\s+is|\s+was|\s+has been|\s+happened|\s+started|\s+began|\s+came)\b"
    r"|^(?:which|because|since then|ever since|especially|mainly because|mostly because|that's why|hence)\b",
    re.IGNORECASE,
)
_LOWER_OPENINGS = grammar.word_set("it that this which because since ever especially mainly mostly hence the")

# "We" and "us": who they are is read from the speaker's words (``rules.we``), this message's
# and their last few turns'.
_WE = re.compile(r"\b(?:we|we're|we've|we'll|us)\b", re.IGNORECASE)
_OWN_TURNS = 3

# How specific a decision is: when two of one message touch the same memory, the lower number wins.
_ATTRIBUTE, _CORRECTION, _COMPLETION, _CHANGE, _ENDING, _ADD = range(6)


def _content_words(text: str) -> set[str]:
    return {w.rstrip("s") for w in words(text) if w not in STOPWORDS and len(w) > 1}


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of content words (plural s ignored)."""
    wa, wb = _content_words(a), _content_words(b)
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def strip_lead(sentence: str) -> str:
    """The sentence without greetings, fillers and announcements ("Big news: ...")."""
    while (m := _LEAD.match(sentence)) and m.end() < len(sentence):
        sentence = sentence[m.end() :].lstrip()
    return sentence[:1].upper() + sentence[1:] if sentence else sentence


def split_sentences(text: str) -> list[str]:
    """Sentences as said (fillers kept: "Actually, ..." is a correction cue)."""
    out = []
    for raw in _SENTENCE_END.split(text.replace("’", "'").strip()):
        sentence = raw.strip()
        if sentence:
            out.append(sentence)
    return out


def _kind(sentence: str, dated: bool) -> Kind:
    if _INSTRUCTION.match(sentence) or (
        _PREFERENCE.search(sentence) and not _NOT_PREFERENCE.search(sentence)
    ):
        return Kind.PREFERENCE
    if dated:
        return Kind.EVENT
    m = _FIRST_VERB.search(sentence)
    if m:
        verb = m.group("verb").lower()
        if m.group("perfect") and _LASTING.search(sentence):
            return Kind.FACT
        if verb not in ("was", "were", "had", "used", "need", "needed") and grammar.is_past(verb):
            if verb not in ("read", "put", "set", "cut", "let", "hit", "hurt", "cost", "shut") or dated:
                return Kind.EVENT
            if verb == "quit":
                return Kind.EVENT
    return Kind.FACT


@dataclass
class _Decision:
    op: ExtractionOp
    rank: int


@dataclass
class _Turn:
    """What every sentence of one message shares."""

    message: Message
    subject: str
    listener: str | None
    neighbours: list[MemoryRecord]
    #: the tenant's categories, which memories are filed under (the built-in lexicon still judges topics)
    lexicon: Lexicon = field(default_factory=lexicon_for)
    #: "we" is the speaker's family: a chat between people, not with an assistant
    household: bool = True
    #: the message answers a question put to the speaker ("What do you work on?")
    asked: bool = False
    #: what was said before, newest first: this message's earlier sentences, then the earlier turns
    before: list[str] = field(default_factory=list)
    #: the same, of the speaker's own words only (this message's earlier sentences, their last turns)
    own_before: list[str] = field(default_factory=list)
    #: the sentence's clauses before this one, newest first: "It's Seattle, I'm stoked for my game there"
    clauses_before: list[str] = field(default_factory=list)
    decisions: list[_Decision] = field(default_factory=list)
    #: the decision the clause just before made, which an elaboration joins
    last: _Decision | None = None

    @property
    def sources(self) -> list[str]:
        return [self.message.id]

    def taken(self) -> frozenset[str]:
        return frozenset(d.op.target_id for d in self.decisions if d.op.target_id)


@dataclass(frozen=True)
class _Said:
    """One clause, rewritten: the memory text and what it is."""

    original: str
    text: str
    kind: Kind
    category: str | None
    event_time: datetime | None


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
        turn = _Turn(message, subject, self.listener(message, context), own, lexicon_for(guidance))
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
        previous = ""
        for sentence in split_sentences(pasted.prose(message.content)):
            if question and not previous and (answer := answers.complete(question, sentence)):
                sentence = answer  # "Where are you based?" - "Just outside Utrecht."
            self._sentence(resolve_pronoun(sentence, strip_lead(previous)) if previous else sentence, turn)
            turn.before.insert(0, sentence)
            turn.own_before.insert(0, sentence)
            previous = sentence
        return _resolve(turn.decisions)

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

    # ------------------------------------------------------------------ one sentence
    def _sentence(self, raw: str, turn: _Turn) -> None:
        sentence = strip_lead(raw)
        # Memory commands first: "could you forget my old address?" is a request, not a question.
        if m := cues.FORGET.match(sentence):
            self._retract(m.group("rest"), ending=False, turn=turn, said=None)
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
        if cues.CORRECTION.search(raw) and self._correction(sentence, turn):
            return
        before = len(turn.decisions)
        turn.clauses_before = []
        for clause in cues.clauses(sentence):
            self._clause(clause, raw, turn)
            turn.clauses_before.insert(0, clause)
        _drop_announcements(turn, before)

    def _clause(self, clause: str, raw: str, turn: _Turn) -> None:
        """One clause; an elaboration ("found out the hard way at a street food stall") joins the
        memory the clause before it made, and makes none of its own."""
        elaboration = strip_lead(clause)
        if _ELABORATION.match(elaboration):
            if grammar.is_past(elaboration.split()[0]):
                elaboration = "I " + elaboration[:1].lower() + elaboration[1:]  # "Learned that the hard way"
            if turn.last is not None and turn.last.op.content:
                said = self._rewrite(elaboration, turn).text
                if said.split()[0].lower() in _LOWER_OPENINGS:
                    said = said[:1].lower() + said[1:]
                content = turn.last.op.content.rstrip(".!") + "; " + said
                turn.last.op = turn.last.op.model_copy(update={"content": content})
            return
        made = len(turn.decisions)
        self._statement(clause, raw, turn)
        turn.last = turn.decisions[-1] if len(turn.decisions) > made else None

    def _statement(self, clause: str, raw: str, turn: _Turn) -> None:
        if len(words(clause)) < 2 or clause.endswith("?") or cues.REQUEST.match(clause):
            return  # "Book me a window seat, I always get airsick": the request is not a memory, the rest is
        name = _NAME.fullmatch(clause)
        if name:
            if name.group(1).casefold() == turn.subject.casefold():
                return  # introducing themselves by the name we already know them by
            clause = f"My name is {name.group(1)}."
        if turn.asked and (answer := _gerund_answer(clause)):
            clause = answer
        elif said_by_speaker := _subjectless_past(clause):
            clause = said_by_speaker
        # "take her to Nara": whom, where; the sentence's own earlier clauses first
        clause = resolve_references(clause, turn.clauses_before + turn.own_before)
        first_person = is_first_person(clause)
        instruction = bool(_INSTRUCTION.match(clause))  # "Please keep your answers short": a preference
        about_listener = bool(_SECOND_PERSON.search(clause))
        topical = turn.lexicon.topicality(clause) >= _MIN_TOPIC_SCORE
        said = self._rewrite(clause, turn)
        if not (first_person or instruction):
            if about_listener:
                return  # about the other speaker
            if not topical and not self._news_about_known(clause, said, turn):
                return  # small talk without a topic
        if (ending := cues.retraction(clause)) and self._retract(
            ending.words, ending=ending.ending, turn=turn, said=said
        ):
            return
        if cues.JOB_ENDING.search(clause) and self._job_ending(said, turn):
            return
        if (
            self._attribute_update(said, turn)
            or self._completion(said, turn)
            or self._change(said, raw, turn)
            or self._contradiction(said, turn)
        ):
            return
        for n in turn.neighbours:
            if overlap(said.text, n.content) >= RESTATEMENT_OVERLAP:
                turn.decisions.append(_Decision(_op("NONE", turn, target=n), _ADD))
                return
        if any(
            d.op.content and overlap(said.text, d.op.content) >= RESTATEMENT_OVERLAP for d in turn.decisions
        ):
            return
        turn.decisions.append(_Decision(_op("ADD", turn, said=said), _ADD))

    def _rewrite(self, clause: str, turn: _Turn) -> _Said:
        when = turn.message.timestamp
        resolved = resolve_relative_dates(clause, when) if when else None
        said = resolved.text if resolved else clause
        we = we_from(said, turn.own_before) if _WE.search(said) else None
        text = to_third_person(said, turn.subject, turn.listener, household=turn.household, we=we)
        text = text[0].upper() + text[1:]
        if text[-1] not in ".!?":
            text += "."
        dated = bool(resolved and resolved.event_time)
        kind = _kind(clause, dated)
        event_time = resolved.event_time if resolved and resolved.event_time else None
        if kind == Kind.EVENT and event_time is None:
            event_time = when
        # Categorise the words the user said: the rewrite adds words ("and family") of its own.
        bonus = {str(Category.PREFERENCES): 1.5} if kind == Kind.PREFERENCE else None
        category = turn.lexicon.categorise(said, bonus) or turn.lexicon.fallback(kind)
        return _Said(clause, text, kind, category, event_time)

    # ------------------------------------------------------------------ decisions
    @staticmethod
    def _update(turn: _Turn, target: MemoryRecord, said: _Said, rank: int) -> None:
        """UPDATE ``target`` to what ``said`` says, "the concert" read as the concert the memory names."""
        text = with_antecedent(said.text, target.content, turn.subject)
        if text != said.text:
            said = _Said(said.original, text, said.kind, said.category, said.event_time)
        turn.decisions.append(_Decision(_op("UPDATE", turn, target=target, said=said), rank))

    def _news_about_known(self, clause: str, said: _Said, turn: _Turn) -> bool:
        """ "The team offsite moved to Porto", "the Iceland trip is booked", "the concert was called
        off": news about something known. An ending counts when a memory names all it is about."""
        if (ended := cues.retraction(clause)) and any(
            named_in(ended.words, n.content, turn.subject) for n in turn.neighbours if editable(n)
        ):
            return True
        news = cues.CHANGE.search(said.original) or cues.COMPLETION.search(said.original)
        if not news:
            return False
        # "The party got postponed": the definite noun is the party a memory names.
        if (thing := definite_subject(said.original)) and any(
            named_in(thing, n.content, turn.subject) for n in turn.neighbours if editable(n)
        ):
            return True
        return best_target(said.text, turn.neighbours, turn.subject, min_shared=2) is not None

    def _retract(self, what: str, *, ending: bool, turn: _Turn, said: _Said | None) -> bool:
        """DELETE the memory a retraction takes back (UPDATE it to the event for an ending)."""
        if not topic(what, turn.subject) or _PRONOUN_OBJECT.match(what):
            # "We don't anymore", "I sold it": what was taken back is what was just talked about.
            return self._retract_antecedent(ending=ending, turn=turn, said=said)
        target = best_target(what, turn.neighbours, turn.subject, exclude=turn.taken())
        if target is None:
            # "The conference got cancelled, so I'm not flying after all": taking back again what this
            # message already changed is part of that change, not a memory of its own (an ending,
            # "I left the bakery", is an event worth keeping either way).
            return not ending and best_target(what, turn.neighbours, turn.subject) is not None
        if ending and said is not None:
            ended = _Said(said.original, said.text, Kind.EVENT, said.category, said.event_time)
            self._update(turn, target, ended, _ENDING)
        else:
            turn.decisions.append(_Decision(_op("DELETE", turn, target=target), _ENDING))
        return True

    def _retract_antecedent(self, *, ending: bool, turn: _Turn, said: _Said | None) -> bool:
        for earlier in turn.before:
            if topic(earlier, turn.subject) and best_target(earlier, turn.neighbours, turn.subject):
                return self._retract(earlier, ending=ending, turn=turn, said=said)
        return False

    def _job_ending(self, said: _Said, turn: _Turn) -> bool:
        for n in turn.neighbours:
            attrs = {a.name for a in find_attributes(n.content, turn.subject)}
            if editable(n) and n.kind != Kind.EVENT and attrs & {"job_title", "employer"}:
                self._update(turn, n, said, _CHANGE)
                return True
        return False

    def _attribute_update(self, said: _Said, turn: _Turn) -> bool:
        """NONE for a known value, UPDATE for a new value of a known attribute."""
        if is_future(said.original):
            return False  # "I'm moving to Osaka next month" is a plan, not yet where they live
        for attr in find_attributes(said.text, turn.subject):
            for n in turn.neighbours:
                if not editable(n):
                    continue  # taken by a less specific decision is fine: the resolution keeps this one
                for old in find_attributes(n.content, turn.subject):
                    if old.name != attr.name:
                        continue
                    if same_value(old.value, attr.value):
                        turn.decisions.append(_Decision(_op("NONE", turn, target=n), _ATTRIBUTE))
                        return True
                    if n.kind == Kind.EVENT and old.name != "job_title":
                        # A past happening stays true: history, not state. Not a role: "started as a
                        # data engineer" is the job they held until a promotion says otherwise.
                        continue
                    turn.decisions.append(_Decision(_attribute_op(turn, n, old, attr, said), _ATTRIBUTE))
                    return True
        return False

    def _completion(self, said: _Said, turn: _Turn) -> bool:
        """ "Finished the Rust book" closes "trying to learn Rust": the goal becomes what happened."""
        if said.kind == Kind.PREFERENCE or not cues.COMPLETION.search(said.original):
            return False
        target = best_target(
            said.text,
            turn.neighbours,
            turn.subject,
            accept=lambda n: bool(cues.GOAL.search(n.content)),
            exclude=turn.taken(),
        )
        if target is None:
            return False
        done = _Said(said.original, said.text, Kind.EVENT, said.category, said.event_time)
        self._update(turn, target, done, _COMPLETION)
        return True

    def _change(self, said: _Said, raw: str, turn: _Turn) -> bool:
        """A habit, preference or plan that changed ("switched to X", "X instead", "moved X to Y")."""
        if not cues.CHANGE.search(raw) or cues.ADDITION.search(said.original):
            return False
        taken = turn.taken()
        if m := cues.SWITCH_FROM.search(said.original):
            target = best_target(m.group("old"), turn.neighbours, turn.subject, exclude=taken)
        else:
            target = best_target(
                said.text,
                turn.neighbours,
                turn.subject,
                accept=lambda n: _changeable(n, said, turn.message.timestamp),
                exclude=taken,
            )
            if (target is None and said.kind == Kind.PREFERENCE) or cues.SWITCH_TO.search(said.original):
                target = target or same_category_preference(said.text, turn.neighbours, taken)
        if target is None:
            target = self._closest_in_meaning(said, turn, taken)
        if target is None:
            return False
        if target.kind != Kind.EVENT and said.kind == Kind.EVENT:
            # "I've switched to coffee" changes a preference: the new version is still a preference.
            said = _Said(said.original, said.text, target.kind, said.category, said.event_time)
        self._update(turn, target, said, _CHANGE)
        return True

    @staticmethod
    def _contradiction(said: _Said, turn: _Turn) -> bool:
        """ "I have never written a Flask route" beside "Wes implemented the login route in Flask":
        the speaker says something never happened that a current memory of theirs says did (or the
        other way round), and no word says it changed (a change, an ending or a correction would
        have been found first), so nothing says which holds. CONFLICT keeps both, linked, for the
        agent to ask. Only "never": other negations say too many other things ("not sure how",
        "can't wait", "wasn't easy"), and an LLM extractor judges those."""
        if not _SPEAKER_SUBJECT.search(said.original) or is_future(said.original):
            return False
        never = cues.never_claim(said.original)
        if not never and cues.negative(said.original):
            return False  # a negation other than "never": no plain statement of either side
        wanted = topic(said.text, turn.subject)

        def opposite(n: MemoryRecord) -> bool:
            # One says it never happened, the other plainly that it did; most of the shorter
            # one's topic words are shared: the two speak of the same thing.
            if never == cues.never_claim(n.content) or (never and cues.negative(n.content)):
                return False
            theirs = topic(n.content, turn.subject)
            return 2 * len(wanted & theirs) >= min(len(wanted), len(theirs))

        target = best_target(
            said.text, turn.neighbours, turn.subject, accept=opposite, min_shared=2, exclude=turn.taken()
        )
        if target is None:
            return False
        turn.decisions.append(_Decision(_op("CONFLICT", turn, target=target, said=said), _ADD))
        return True

    def _closest_in_meaning(self, said: _Said, turn: _Turn, taken: frozenset[str]) -> MemoryRecord | None:
        """The state a change of the speaker's own replaces when no word links them ("I've become a
        morning person" -> "is a night owl"): the neighbour closest in meaning, at least
        ``link_similarity`` close, or half-way closer when both speak to the same category."""
        if self.embedder is None or not _SPEAKER_SUBJECT.search(said.original):
            return None
        found = most_similar(
            said.text,
            turn.neighbours,
            turn.subject,
            self.embedder,
            accept=lambda n: _changeable(n, said, turn.message.timestamp),
            exclude=taken,
        )
        if found is None:
            return None
        target, similarity = found
        if similarity >= self.link_similarity:
            return target
        category = categorise(said.original)
        agree = category is not None and category == categorise(target.content)
        return target if agree and similarity >= self.link_similarity - _AGREEING_CATEGORY_ALLOWANCE else None

    def _correction(self, sentence: str, turn: _Turn) -> bool:
        """ "Sorry, I meant Hannah, not Anna", "Actually it's Stripe, not Shopify": replace what was wrong."""
        body = cues.CORRECTION_PREAMBLE.sub("", sentence).strip()
        body = strip_lead(body) if body else body
        if not body:
            return False
        m = cues.NOT_THAT.match(body)
        if m is None:
            return self._corrected_statement(body, turn)
        main, old = m.group("main").strip(), m.group("old").strip()
        taken = turn.taken()
        target = next(
            (n for n in turn.neighbours if editable(n) and n.id not in taken and _mentions(n.content, old)),
            None,
        )
        if target is None:
            target = best_target(old, turn.neighbours, turn.subject, exclude=taken) or best_target(
                main, turn.neighbours, turn.subject, exclude=taken
            )
        if target is None:
            return False
        fragment = cues.FRAGMENT.match(main)
        if fragment and _mentions(target.content, old):
            value = fragment.group("value").strip()
            content = _replace_phrase(target.content, old, value)
            filed = target.category or turn.lexicon.fallback(Kind.FACT)
            said = _Said(main, content, target.kind, filed, None)
        else:
            said = self._rewrite(main, turn)
        self._update(turn, target, said, _CORRECTION)
        return True

    def _corrected_statement(self, body: str, turn: _Turn) -> bool:
        """A correction without "not Y": the statement replaces the memory about the same thing."""
        clause = cues.clauses(body)[0]
        said = self._rewrite(clause, turn)
        if self._attribute_update(said, turn):
            return True
        taken = turn.taken()
        target = best_target(said.text, turn.neighbours, turn.subject, exclude=taken)
        if target is None and said.kind == Kind.PREFERENCE:
            target = same_category_preference(said.text, turn.neighbours, taken)
        if target is None:
            return False
        self._update(turn, target, said, _CORRECTION)
        for rest in cues.clauses(body)[1:]:
            self._clause(rest, rest, turn)
        return True


def _gerund_answer(clause: str) -> str | None:
    """ "Mostly building pipelines in Python." answering "what do you work on?": the speaker is doing
    it, so "I'm mostly building pipelines in Python." (not when the gerund is the subject of a verb
    of its own: "Building pipelines is fun")."""
    tokens = clause.split()
    at = 0
    while at < len(tokens) - 1 and grammar.is_adverb(tokens[at]):
        at += 1
    head = tokens[at].lower() if tokens else ""
    if not head.endswith("ing") or not grammar.is_verb(head) or _FINITE.search(" ".join(tokens[at + 1 :])):
        return None
    return "I'm " + clause[:1].lower() + clause[1:]


def _subjectless_past(clause: str) -> str | None:
    """ "Moved to Cardiff in March.", "Got bumped up to senior analyst.": the speaker leaves out
    the "I" of what they did; "I moved to Cardiff in March." (not "Got it.", not "Tired of Java")."""
    tokens = clause.split()
    at = 0
    while at < len(tokens) - 1 and grammar.is_adverb(tokens[at]):
        at += 1
    head = tokens[at].lower().strip(",") if tokens else ""
    if len(tokens) - at < 3 or not grammar.is_past(head) or _PRONOUN_OBJECT.match(" ".join(tokens[at + 1 :])):
        return None
    if "ADJ" in grammar.tags(head) and tokens[at + 1].lower() not in _OBJECT_START:
        return None  # "Tired of the commute": how they feel, not what they did
    return "I " + clause[:1].lower() + clause[1:]


_OBJECT_START = grammar.word_set("the a an my our to at in up out from with as his her their")


def _drop_announcements(turn: _Turn, start: int) -> None:
    """ "I switched careers, I'm a paramedic now": the first clause only announces the update beside it."""
    made = turn.decisions[start:]
    if not any(d.op.op == "UPDATE" for d in made):
        return
    turn.decisions[start:] = [
        d for d in made if not (d.op.op == "ADD" and len(topic(d.op.content or "", turn.subject)) < 2)
    ]


def _changeable(n: MemoryRecord, said: _Said, now: datetime | None) -> bool:
    """A change replaces a current state, habit, preference or plan; a past happening stays true."""
    if n.kind == Kind.EVENT:
        ahead = n.event_time is not None and now is not None and n.event_time > now
        return bool(
            ahead
            or cues.RESCHEDULE.search(said.original)
            or cues.FUTURE.search(n.content)
            or is_future(n.content)
            or cues.GOAL.search(n.content)
        )
    # A habit replaces a liking and a liking a habit ("I love cycling to work" -> "these days I
    # take the bus"): both are states of the user.
    return True


def _mentions(text: str, phrase: str) -> bool:
    core = [w for w in words(phrase) if w not in STOPWORDS and w not in ("one", "the")]
    core = [re.sub(r"(?<=\d)(?:st|nd|rd|th)$", "", w) for w in core]
    return bool(core) and all(re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE) for w in core)


def _replace_phrase(text: str, old: str, new: str) -> str:
    core = " ".join(w for w in old.split() if w.lower() not in ("a", "an", "the"))
    out = re.sub(rf"\b{re.escape(core)}\b", new, text, count=1, flags=re.IGNORECASE)
    return out if out != text else text


def _attribute_op(
    turn: _Turn, n: MemoryRecord, old: AttributeValue, new: AttributeValue, said: _Said
) -> ExtractionOp:
    if old.stative and old.name != "job_title":
        # "lives in Tokyo with their partner" -> "lives in Osaka with their partner":
        # the rest of what the memory says stays true. Not for a job: "a barista at a cafe"
        # does not become "a designer at a cafe" (the rest is usually the old employer).
        # The state holds now: "has lived in Glasgow since university" -> "lives in Edinburgh".
        start, end = old.span
        head = n.content[:start]
        if old.verb is not None:
            head = head[: old.verb[0]] + present(n.content[old.verb[0] : old.verb[1]]) + head[old.verb[1] :]
        content = head + new.value + drop_duration(n.content[end:])
        category = n.category
        if category is None or not turn.lexicon.scores(content).get(category):
            # "lives in Edinburgh" is no longer educational because the old text said "since university".
            category = turn.lexicon.categorise(content) or said.category
        kept = _Said(said.original, content, n.kind, category, said.event_time)
        return _op("UPDATE", turn, target=n, said=kept)
    # "got promoted to analyst" replaces a state ("is a junior analyst"): the new version is that state.
    state = _Said(said.original, said.text, n.kind, said.category, said.event_time)
    return _op("UPDATE", turn, target=n, said=state)


def _op(
    kind: OpName, turn: _Turn, *, target: MemoryRecord | None = None, said: _Said | None = None
) -> ExtractionOp:
    return ExtractionOp(
        op=kind,
        target_id=target.id if target else None,
        content=said.text if said else None,
        kind=said.kind if said else Kind.FACT,
        category=said.category if said else None,
        event_time=said.event_time if said else None,
        source_ids=turn.sources,
    )


def _resolve(decisions: list[_Decision]) -> list[ExtractionOp]:
    """One decision per memory: the most specific; a replaced ending is kept as its own event."""
    best: dict[str, _Decision] = {}
    for d in decisions:
        target = d.op.target_id
        if target and (target not in best or d.rank < best[target].rank):
            best[target] = d
    out: list[ExtractionOp] = []
    for d in decisions:
        target = d.op.target_id
        if not target or best[target] is d:
            out.append(d.op)
        elif d.op.op == "UPDATE" and d.op.content:
            out.append(d.op.model_copy(update={"op": "ADD", "target_id": None}))
    return out


def build(settings: Settings, clients: Mapping[str, Any], embedder: Embedder | None) -> RuleExtractor:
    """``MEMSTACK_LLM=local``: changes linked by meaning with ``embedder`` (``factory.EXTRACTORS``)."""
    return RuleExtractor(embedder)
