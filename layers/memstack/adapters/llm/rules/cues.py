"""What a sentence does to memory, read from its wording: the cues of the local extractor.

Each pattern reads the user's own (first-person) words, before the rewrite:

- **requests** to the assistant ("tell me a joke", "please translate ...") and
  **hypotheticals** ("if I lived in Paris ...") are not facts about the user;
- **memory commands**: "remember that X" is X; "forget (that) X" retracts X;
- **retractions** of a state ("I no longer X", "X isn't for me anymore",
  "I'm not X after all") delete what they take back; **endings** ("I quit X",
  "I sold X", "I cancelled X", "X and I broke up") replace it with the event;
- **corrections** ("actually", "sorry, I meant", "X, not Y") replace a memory;
- **changes** ("switched to", "instead", "these days", "moved X to") replace
  the memory about the same thing;
- **completions** ("finished", "passed", "bought") close a goal ("trying to ...").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memstack.adapters.llm.rules.grammar import alternation, is_finite
from memstack.adapters.llm.rules.grammar import tags as grammar_tags

_I = r"(?:I|we)"
_IM = r"(?:I'm|I am|we're|we are)"
_AGAIN = r"(?:anymore|any more|any longer)"
_END = r"(?=[,.;!?]|\s+(?:and|so|but|because|since)\b|$)"

# A task for the assistant ("explain how ...", "please review my plan"): asked for, not a fact.
REQUEST = re.compile(
    # "I need you to ...", "we'd like you to ...": whatever follows is a task for the listener.
    r"^(?:I|we)(?:\s+(?:really|just|also))?(?:\s+(?:need|want|would like)|'d like)\s+you\s+to\b|"
    # "I was wondering if you could ...", "I'd appreciate it if you would ...": asked politely.
    r"^(?:I|we)\b[^.!?]*?\bif you\s+(?:could|can|would|will|might|'d)\b|"
    # Asking for help or to be told something: "I'm looking for advice on ...", "I'd love some
    # feedback on ...", "I want to know how to ..." (not a goal: "I want to learn the guitar").
    r"^(?:I|we)(?:'m|'re|\s+am|\s+are)?(?:\s+(?:really|just|also))?(?:\s+(?:looking for|need|want|would like|"
    r"would love|could use)|'d like|'d love)\s+(?:some\s+|any\s+|your\s+)?(?:advice|help|tips|feedback|"
    r"suggestions|ideas|recommendations|guidance|input|pointers|thoughts|"
    r"(?:a\s+)?(?:second\s+|quick\s+|fresh\s+)?(?:opinion|sanity check|pair of eyes))\b|"
    r"^(?:I|we)\s+(?:(?:really|just|also)\s+)?(?:want|need|would like|'d like)\s+to\s+(?:know|understand|"
    r"find out|figure out)\s+(?:how|what|why|whether|if|which|where|when|who)\b|"
    r"^(?:please\s+|(?:can|could|would|will) you\s+(?:please\s+)?)?(?:tell|translate|summari[sz]e|write|give|"
    r"show|explain|recommend|suggest|find|list|draft|generate|create|calculate|define|describe|compare|"
    r"convert|plan|book|send|help|review|check|fix|debug|improve|rewrite|optimi[sz]e|walk)\s+"
    r"(?:me\b|us\b|a\b|an\b|the\b|this\b|that\b|these\b|those\b|some\b|my\b|our\b|it\b|how\b|why\b|"
    r"what\b|whether\b|which\b|when\b|where\b|'|\")",
    re.IGNORECASE,
)
HYPOTHETICAL = re.compile(r"^(?:if|suppose|supposing|imagine|what if|in theory)\b", re.IGNORECASE)
SMALL_TALK = re.compile(
    r"^(?:thanks?|thank you|ok(?:ay)?|cool|great|nice|sure|bye|good (?:morning|night|evening|afternoon)|"
    r"lol|haha|hmm+|hm|um+|uh+|brb|let me|let's see|(?:that |it )?sounds|"
    r"that's (?:so |really )?(?:great|awesome|amazing|cool|nice|wonderful|hilarious|funny)|"
    r"it must|must be|what a|how (?:cool|nice|great|awesome)|congrat\w*|cute|aww?)\b",
    re.IGNORECASE,
)

# A memory command is a request, however politely it is put: "you can forget X now", "could you delete X?".
_ASKING = r"(?:(?:please|just|you can|you may|you could|can you|could you|would you|will you|I want you to|"
_ASKING += r"I'd like you to|go ahead and)\s+)*"
REMEMBER = re.compile(
    r"^" + _ASKING + r"(?:remember|note|keep in mind)\s+(?:that\s+)?(?P<rest>.+?)(?:,?\s+please)?[.!?]?$",
    re.I,
)
# "forget X", or with the gerund a polite question takes: "would you mind deleting X?"
_FORGET_VERBS = "forget, disregard, delete, erase"
_FORGETTING = (
    rf"(?:{alternation(_FORGET_VERBS, 'VB')}|(?:would|do) you mind\s+{alternation(_FORGET_VERBS, 'VBG')})"
)
# "Remove" is a memory command only with the memory as its object ("remove the note about X"):
# "remove the onions" is a recipe.
_MEMORY_NOUN = r"(?:note|memory|bit|part|line|entry|thing)"
_REMOVING = r"(?:remove|take out|drop)\s+(?:the|that|my)\s+" + _MEMORY_NOUN + r"\s+(?:about|on)\s+"
FORGET = re.compile(
    r"^"
    + _ASKING
    + rf"(?:{_FORGETTING}\s+(?:that\s+|about\s+|what I (?:said|told you) about\s+)?|{_REMOVING})"
    # "Forget it" alone is "never mind", not a request to delete anything.
    r"(?!it\s*(?:[,.;!?]|$))(?P<rest>[^.;!?]+?)(?:,?\s+(?:please|now|for me))*(?=[,.;!?]|$)",
    re.IGNORECASE,
)

# A state taken back: the memory that states it is deleted.
STATE_RETRACTIONS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\b{_I}\s+(?:don't|do not|dont|no longer)(?:\s+(?P<rest>.+?))?\s+{_AGAIN}",
        # An answer that takes back what was asked about: "Not anymore." ("Do you still ...?")
        rf"^(?:no,?\s+)?not\s+{_AGAIN}(?P<rest>)",
        rf"\b{_I}\s+no longer\s+(?P<rest>[^,.;!?]+)",
        rf"\b{_IM}\s+(?:no longer|not)\s+(?P<rest>.+?)\s+(?:{_AGAIN}|after all)",
        rf"\b{_IM}\s+no longer\s+(?P<rest>[^,.;!?]+)",
        r"^(?P<rest>[^,;!?]+?)\s+(?:isn't|is not|aren't|are not)\s+"
        r"(?:really\s+)?(?:for me|my thing|my cup of tea|my jam)\b",
        rf"\b{_I}(?:'ve| have)?\s+(?:gone off|fallen out of love with|lost interest in)\s+"
        r"(?P<rest>[^,.;!?]+)",
    )
)
# Something ended: the memory is replaced by what happened to it.
# Verbs that end something, in any past or perfect form ("quit", "have given up on", "had to sell").
_ENDING_VERBS = (
    "give up on, give up, decide against, break up with, call off, get rid of, stop, quit, cancel, sell, "
    "drop, end, leave, ditch, abandon, scrap, pull out of, drop out of, back out of, withdraw from, "
    "trade in, part with"
)
_ENDED = alternation(_ENDING_VERBS, "VBD", "VBN")
_PREPOSITION = r"(?:by|at|in|into|for|over|off|to|from|with|on)"
_ADVERBS = r"(?:\s+(?:just|finally|recently|already|eventually|\w+ly))*"
_PARTICLE_VERB = alternation("give, send, call", "VB", "VBD", "VBN")
_CALLED_OFF = alternation("cancel, call off, scrap, drop", "VBN")
ENDINGS = tuple(
    re.compile(p, re.IGNORECASE)
    for p in (
        # An ending takes an object: "I stopped by the shop" is a visit, "I left for Rome" a trip.
        rf"\b{_I}(?:'ve| have| had)?{_ADVERBS}\s+(?:{_ENDED}|had to\s+{alternation(_ENDING_VERBS, 'VB')})\s+"
        rf"(?!{_PREPOSITION}\b)(?P<rest>[^,.;!?]+?){_END}",
        # The object between verb and particle: "we had to give Rex away", "I called the wedding off".
        rf"\b{_I}(?:'ve| have)?{_ADVERBS}\s+(?:had to\s+)?{_PARTICLE_VERB}"
        r"\s+(?P<rest>\w+(?:\s+\w+)?)\s+(?:away|up|off)\b",
        r"\b(?P<rest>[A-Z][\w-]+) and I (?:broke up|split up|separated|divorced)\b",
        rf"^(?P<rest>[^,.;!?]+?)\s+(?:got|was|were|has been|have been)\s+{_CALLED_OFF}\b",
    )
)
# Leaving work: replaces what is known about the job, whatever words it used.
JOB_ENDING = re.compile(
    rf"\b{_I}(?:'ve| have)?\s+(?:just\s+|finally\s+)?(?:retired|quit my job|lost my job|left my job|"
    r"got (?:laid off|fired|made redundant)|was (?:laid off|fired|made redundant))\b",
    re.IGNORECASE,
)
CORRECTION = re.compile(
    r"^(?:actually|sorry|oops|correction|no wait|wait|my mistake|my bad|I meant|I mean|to correct|"
    r"oh,? I got that wrong|I got that wrong|I should correct|let me correct)\b"
    r"|\b(?:I got that wrong|I mixed (?:them|those|it) up|I misspoke|I was wrong)\b",
    re.IGNORECASE,
)
# "X, not Y": Y names what the correction takes back.
NOT_THAT = re.compile(r"^(?P<main>.+?),?\s+(?:and\s+)?not\s+(?P<old>[^,.;!?]+?)(?=[,.;!?]|$)", re.I)
FRAGMENT = re.compile(
    r"^(?:I meant|I mean|it's|it is|it was|that's|that is|make that|it should be)\s+(?P<value>[^,.;!?]+)$",
    re.I,
)
# Preamble of a correction that says nothing itself.
CORRECTION_PREAMBLE = re.compile(
    r"^(?:(?:oh|oops|sorry|no wait|wait|actually|correction|my mistake|my bad)[,:!]?\s+)*"
    r"(?:I got that wrong|I should correct that|let me correct that|to correct that|"
    r"I mixed (?:them|those) up)"
    r"[,:;.!]?\s*",
    re.IGNORECASE,
)
CHANGE = re.compile(
    r"\b(?:now|these days|nowadays|anymore|instead|switched|switching|changed|change of plans?|"
    r"became|become|back to|from now on|since|moved|rescheduled|postponed|brought forward|made me)\b"
    # An amount or setting changed to another: "lowered my citalopram to 10mg", "bumped the limit to 1Gi".
    r"|\b(?:lowered|raised|increased|reduced|decreased|cut|bumped|upped|dropped|doubled|halved|adjusted|"
    r"tapered)\b(?:\s+[\w'-]+){1,4}\s+(?:to|down to|up to)\s+\d",
    re.IGNORECASE,
)
# Moving a plan ("we moved the wedding to October") says the plan was still ahead, whatever its tense.
RESCHEDULE = re.compile(
    r"\b(?:moved|rescheduled|postponed|pushed back|brought forward|changed)\b(?:\s+\w+){0,4}\s+to\b", re.I
)
SWITCH_FROM = re.compile(
    r"\b(?:switched|changed|moved|gone|went|upgraded)\s+from\s+(?P<old>[^,.;!?]+?)\s+to\s+(?P<new>[^,.;!?]+)",
    re.I,
)
SWITCH_TO = re.compile(r"\b(?:switched|changed|moved on|gone back|went back|back)\s+to\b", re.IGNORECASE)
# Additive "too" ends its clause ("I have a cat too"); "too dangerous" is degree, not addition.
ADDITION = re.compile(r"\b(?:also|too(?=\s*(?:[,.;!?]|$))|as well|another|in addition)\b", re.IGNORECASE)
COMPLETION = re.compile(
    r"\b(?:finished|completed|passed|bought|submitted|found|achieved|reached|hit|graduated|signed|"
    r"published|launched|won|ran|booked|got|done with|landed|made it|succeeded|defended)\b",
    re.IGNORECASE,
)
# In a stored memory: something the user was working towards.
GOAL = re.compile(
    r"\b(?:trying to|training for|wants? to|saving up|saving for|is writing|are writing|is learning|"
    r"are learning|learning to|looking for|working on|working towards?|planning to|hoping to|hopes? to|"
    r"preparing for|studying for|aims? to|aiming to|is going to|are going to|would like to|dreams? of)\b",
    re.IGNORECASE,
)
FUTURE = re.compile(r"\b(?:will|going to|planning|plans?|next|upcoming|tomorrow|soon)\b", re.IGNORECASE)
# "I sold it last month", "I gave them away": the object is a pronoun.
PRONOUN_OBJECT = re.compile(r"^(?:it|them|that|this|those|these|one|him|her)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Retraction:
    """What a sentence takes back (``words``), and whether the memory becomes the event (``ending``)."""

    words: str
    ending: bool


def retraction(sentence: str) -> Retraction | None:
    for pattern in ENDINGS:
        if m := pattern.search(sentence):
            return Retraction(m.group("rest"), ending=True)
    for pattern in STATE_RETRACTIONS:
        if m := pattern.search(sentence):
            return Retraction(m.group("rest") or "", ending=False)
    return None


# What leads into the clause after it and says nothing alone: "Having lived in Seoul for six years, I
# speak Korean", "After the layoffs at Bolt, I went freelance", "Growing up in Oslo, I skied a lot".
_FIRST_PERSON_WORD = re.compile(r"\b(?:I|I'm|I've|me|my|we|we're|our)\b", re.IGNORECASE)
_SUBORDINATE = re.compile(
    r"^(?:having|being|after|before|since|while|when|once|although|though|despite)\b", re.I
)


def _leads_in(piece: str) -> bool:
    words = piece.split()
    first = words[0].lower().strip(",")
    if _SUBORDINATE.match(piece):
        return True
    # "Growing up in Oslo, I ...", not a gerund that is a subject: "Networking plays a big role, and I ...".
    subject = len(words) > 1 and is_finite(words[1].strip(",.;"))
    return (
        first.endswith("ing")
        and "VERB" in grammar_tags(first)
        and not subject
        and not _FIRST_PERSON_WORD.search(piece)
    )


# "I'm type 1 diabetic, so I check my blood sugar often": what follows from the clause before stays
# with it (the reason is what makes the rest worth knowing), when the two are short enough to be one.
_SO = re.compile(r"^\s*,\s*so\s+$")
_SO_MAX_CHARS = 160
# "I'm vegetarian and I'm allergic to peanuts": a short piece that is a first-person clause of its
# own (its subject and a verb) says one thing and the next clause another; "Leo and I", "my wife
# and I" have no verb of their own and join the clause they open.
_OWN_CLAUSE = re.compile(r"^(?:I'm|I am|I've|I have)\s+\S", re.IGNORECASE)


def clauses(sentence: str) -> list[str]:
    """A sentence cut where a new first-person clause starts ("I quit X, and now I work as Y")."""
    pieces = re.split(
        r"((?:,|;|:|\s+-\s+)\s*(?:and\s+|so\s+|but\s+)?(?:now\s+|then\s+|these days\s+)?"
        r"(?=(?:I|I'm|I've|we|we're|my)\b)"
        r"|\s+(?:and|so|but)\s+(?=(?:I|I'm|I've|we|we're)\s))",
        sentence,
    )
    out: list[str] = []
    cut = ""
    for i, piece in enumerate(pieces):
        if i % 2:
            cut = piece
            continue
        part = piece.strip()
        if not part:
            continue
        if out and (
            (len(out[-1].split()) < 3 and not _OWN_CLAUSE.match(out[-1]))
            or (len(out) == 1 and cut.lstrip().startswith(",") and _leads_in(out[0]))
            or (_SO.match(cut) and len(out[-1]) + len(part) <= _SO_MAX_CHARS)
        ):
            # "Leo and I broke up", "my wife and I run ...": one clause; a short opening ("However, I'm
            # not sure", "Right now, I'm ...") joins back with the words that were cut, not with "and".
            out[-1] = f"{out[-1]}{cut}{part}"
        else:
            out.append(part)
    return out


# A statement that something is not so ("I don't eat meat"), and words that say the negative
# themselves ("dislikes olives" agrees with "doesn't like olives").
_NEGATION = re.compile(r"\b(?:never|not|no|cannot|nobody|nothing|neither|nor)\b|n[’']t\b", re.IGNORECASE)
_NEGATIVE_WORD = re.compile(r"\b(?:dislik\w*|hate[sd]?|hating|avoid\w*|refus\w*|allergic)\b", re.IGNORECASE)
# "I have never written a Flask route": a claim that something never happened, the one negation
# plain enough to contradict a statement that it did ("not sure", "can't wait", "wasn't easy" say
# something else); not the idioms ("never forget", "never been happier") nor a condition.
_NEVER = re.compile(r"\bnever\b|\b(?:have|has|had)(?:\s+not|n't)\s+ever\b", re.IGNORECASE)
_NEVER_IDIOM = re.compile(
    r"\bnever\s+(?:forget|forgets|forgot|mind|again|too|ever|before|thought|expected|imagined|knew|"
    r"felt|fails?|stops?|ceases?|been\s+(?:so|this|happier|better|more|prouder))\b|\bnever\s*[,.!?]"
    r"|\bif\b[^.!?]*\bnever\b",  # a condition: "try it if you've never played it"
    re.IGNORECASE,
)


def negative(text: str) -> bool:
    """Whether ``text`` says something is not so ("is not allergic" is positive again)."""
    return bool(_NEGATION.search(text)) != bool(_NEGATIVE_WORD.search(text))


def never_claim(text: str) -> bool:
    """Whether ``text`` says something never happened ("has never written a Flask route")."""
    return bool(_NEVER.search(text)) and not _NEVER_IDIOM.search(text)
