"""The clauses of one sentence: each makes its own memory, except an elaboration, which joins
the memory of the clause it elaborates.

"I'm allergic to peanuts, I found out the hard way at a street food stall" is one memory:
"(I) found out / learned ... the hard way / when / at ...", "It/That/This is/was ..." and
"which / because / since then ..." only say more about what came just before. With nothing
before it, an elaboration makes no memory.
"""

from __future__ import annotations

import re

from memstack.adapters.llm.rules import grammar
from memstack.adapters.llm.rules.rewrite import is_first_person
from memstack.adapters.llm.rules.sentences import strip_lead
from memstack.adapters.llm.rules.statements import rewrite, statement, with_references
from memstack.adapters.llm.rules.targets import topic
from memstack.adapters.llm.rules.turn import Decision, Turn
from memstack.domain.text import STOPWORDS

# What only says more about the clause before it: "(I) found out the hard way at a street food
# stall", "It was my grandfather's", "which is why ...", "mostly so I can ...", "Best decision I ever
# made." It joins that clause's memory.
_ELABORATION = re.compile(
    r"^(?:(?:I|we)\s+)?(?:found out|learned|learnt|discovered|realised|realized|"
    r"(?:got\s+|was\s+|were\s+|been\s+)?diagnosed|"
    r"(?:figured|found|worked) (?:it|that|this) out)"
    r"(?:\s+(?:that|it|this))?(?=\s*(?:[,.;!]|$)|\s+(?:the hard way|when|after|at|in|on|during|from|last|"
    r"years?|early|quickly|back|recently|while|because)\b)"
    r"|^(?:that|this|it)(?:'s|\s+is|\s+was|\s+has been|\s+happened|\s+started|\s+began|\s+came)\b"
    r"|^(?:which|because|since then|ever since|especially|that's why|hence|so that|in order to|"
    r"the reason being|the reason (?:is|was)|thanks to|for (?:this|that|it)(?: reason)?|"
    r"because of (?:this|that|it))\b"
    # What someone else did too: "My partner did too, actually.", "My sister is as well.", "So does my
    # wife.": nothing of its own without the clause it repeats.
    r"|^(?:my|our)\s+(?:[\w-]+\s+){1,3}?(?:did|does|do|is|was|are|were|has|have|had|will|can)"
    r"(?:\s+(?:too|as well|also))(?=\s*(?:[,.;!]|$|actually|now))"
    r"|^(?:and\s+)?so\s+(?:did|does|do|is|was|has|have)\s+(?:my|our)\s+[\w-]+\s*[.!]?$"
    # A reason hedged on its own: "Burned out, mostly, after two years of audits."
    r"|^[^,]{1,25},\s*(?:mostly|mainly|partly|largely)\s*,"
    # Why: "mostly so I can talk to ...", "partly because ...", "mainly for the light".
    r"|^(?:mostly|mainly|partly|largely|purely|just|only)\s+(?:so|because|for|to)\b"
    # A verdict with no verb of its own: "Best decision I ever made.", "One of the worst weeks we've had."
    r"|^(?:(?:easily|probably|honestly|definitely|by far)\s+)?(?:one of\s+)?(?:the\s+|my\s+)?"
    r"(?:best|worst|biggest|smartest|greatest|hardest|scariest|proudest|happiest|dumbest)\s+\w+(?:\s+\w+)?"
    r"\s+(?:I|we)(?:'ve|'d)?\s+(?:\w+\s+)?(?:ever\s+)?\w+\s*[.!]?$",
    re.IGNORECASE,
)
# What points back to the clause before it: its object is "it", "that" or "them" ("I set it up with
# my savings", "my sister drew the design for it", "picked that up during lockdown"), or a "to" that
# leaves its verb to that clause ("my cardiologist told me to after a scare").
_SUBJECT = r"(?:(?:I|we|(?:my|our)\s+[\w-]+(?:\s+[A-Z][a-z]+)?)\s+)?(?:\w+ly\s+)?"
# "signed off on it", "picked that up": a verb and its particle before the pronoun.
_PARTICLE = r"(?:\s+(?:off|up|out|on|in|over|back|down|through|into|onto|for|with|to|about|of|at)){0,2}"
_AFTER_PRONOUN = (
    r"(?=\s*(?:[,.;!]|$)|\s+(?:up|out|down|off|over|back|away|on|in|at|for|with|from|to|after|before|during|"
    r"when|while|since|because|last|every|so|too|again|myself|ourselves|the hard way|a lot|all|yesterday|"
    r"today|now)\b)"
)
_POINTS_BACK = re.compile(
    rf"^{_SUBJECT}[a-z]+{_PARTICLE}\s+(?:it|that|this|them){_AFTER_PRONOUN}"
    r"|\b(?:told|asked|advised|wanted|needed|forced|made|begged|convinced|encouraged|persuaded)\s+"
    r"(?:me|us|him|her|them)\s+to(?=\s*(?:[,.;!]|$)|\s+(?:after|before|when|because|since|last|during)\b)",
    re.IGNORECASE,
)
# "my sister drew the design for it": a short clause that ends on what it points back to (a long one
# that does, "... can you help me with that", says enough of its own).
_ENDS_POINTING_BACK = re.compile(
    r"\b(?:for|of|about|with|into|behind)\s+(?:it|that|this|them)\s*[.!]?$", re.IGNORECASE
)
_SHORT = 12
_LOWER_OPENINGS = grammar.word_set(
    "it that this which because since ever especially mainly mostly hence the a an for too so not nobody"
)


# A sentence without a finite verb of its own: "A gift from my grandfather, who played it in Aleppo.",
# "Too expensive to keep running in the city." It says more about what was just said.
_FINITE = grammar.word_set(
    "am is are was were be been has have had do does did will would can could should may might must shall "
    "i'm it's that's there's he's she's we're they're i've we've they've i'd i'll "
    "isn't wasn't aren't weren't don't doesn't didn't won't can't couldn't"
)
_RELATIVE = re.compile(r"[,;:(]|\b(?:who|which|that|where|whose|whom)\b", re.IGNORECASE)
_FRAGMENT_OPENING = grammar.word_set("a an too so not quite pretty really very such")
_FRAGMENT_LINK = grammar.word_set("from of by for to after before in at with because since during")
_FRAGMENT_MIN = 4
# A sentence about neither speaker that points back or gives a reason ("Nobody was updating the
# tickets anyway.", "half the team is in Lisbon now so 9 was too early for them", "The physio thinks
# it's patellar tendonitis."): too little alone, it joins the memory said just before it.
_POINTER = re.compile(r"\b(?:it|it's|that|this|them|there|anyway|so|because|since|hence)\b", re.IGNORECASE)
_SECOND_PERSON = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|you'd)\b", re.IGNORECASE)
_JOIN_MAX_WORDS = 20
# A memory that what says more joins stays short: a longer one ranks lower for what it was about
# (BM25's length norm, a diluted embedding), and what says more is in its turn still.
_JOINED_MAX_CHARS = 200


def _fragment(text: str) -> bool:
    """A verbless fragment ("A gift from my grandfather, who ...", "Too expensive to keep running")."""
    head = _RELATIVE.split(text, maxsplit=1)[0].split()
    if len(text.split()) < _FRAGMENT_MIN or not head or head[0].lower() not in _FRAGMENT_OPENING:
        return False
    low = [w.lower().strip(".!") for w in head]
    if not any(w in _FRAGMENT_LINK for w in low):
        return False
    for i, w in enumerate(low):
        if w in _FINITE or w.endswith("n't"):
            return False
        if i and grammar.is_past(w) and low[i - 1] not in ("a", "an", "the", "my", "our", "to"):
            return False
    return True


def _says_more(text: str, turn: Turn) -> bool:
    """What no statement of its own took, but says more about the memory just made: not a verdict
    without a thing in it ("it's been tough", "that's so cool": the memory only grows longer), not a
    photo's caption or words that lead into pasted output."""
    return (
        turn.whole_sentence
        and not text.startswith("[")
        and not text.rstrip().endswith("!")  # a reaction: "the Eiffel Tower is so cool!"
        and not _VERDICT.search(text)
        and not is_first_person(text)
        and not _SECOND_PERSON.search(text)
        and not text.rstrip(" .").endswith(("?", ":"))
        and len(text.split()) <= _JOIN_MAX_WORDS
        and bool(_POINTER.search(text))
        and _names_something(text)
    )


# "That picture is awesome.", "the food looked amazing": how something seemed, said in passing.
_VERDICT = re.compile(
    r"\b(?:is|are|was|were|'s|'re|looks?|looked|sounds?|sounded|seems?|seemed|feels?|felt)\s+"
    r"(?:(?:so|really|very|super|pretty|totally|absolutely|just|such|truly|quite|too)\s+)*(?:an?\s+)?"
    r"[\w-]+\s*[.!]*$",
    re.IGNORECASE,
)
# Nouns that name nothing in particular: "the whole thing", "a lot", "every time".
_VAGUE = grammar.word_set(
    "thing things stuff way ways time times lot lots bit day days moment fun deal kind sort part one ones "
    "something anything everything nothing feeling idea life world journey experience memory memories"
)


def _names_something(text: str) -> bool:
    """A word that names a thing or someone: a noun that is not also an adjective ("tickets", "team"),
    a word the tables do not know ("tendonitis"), a name or a number."""
    tokens = re.findall(r"[A-Za-z][\w'-]*|\d[\w.]*", text)
    for i, token in enumerate(tokens):
        low = token.lower()
        if low in STOPWORDS or low in _VAGUE or _POINTER.fullmatch(low):
            continue
        if token[0].isdigit() or (i and token[0].isupper()):
            return True
        tags = grammar.tags(low)
        if ("NOUN" in tags and "ADJ" not in tags and "ADV" not in tags) or (not tags and len(low) > 4):
            return True
    return False


def _join_as_is(text: str, last: Decision, turn: Turn) -> None:
    """``text`` after ``last``'s memory, rewritten without a subject put in: "helped a lot with the
    user's back pain" (who or what helped is the memory before it)."""
    said = rewrite(with_references(text, turn), turn).text
    content = (last.op.content or "").rstrip(".!") + "; " + said[:1].lower() + said[1:]
    last.op = last.op.model_copy(update={"content": content})


def _join(elaboration: str, turn: Turn) -> None:
    """``elaboration`` (rewritten) after the memory the clause before it made."""
    assert turn.last is not None and turn.last.op.content
    said = rewrite(with_references(elaboration, turn), turn).text
    first = (re.findall(r"^[A-Za-z]*", said) or [""])[0].lower()
    if first in _LOWER_OPENINGS or (first != "i" and grammar.tags(first)):
        said = said[:1].lower() + said[1:]
    content = turn.last.op.content.rstrip(".!") + "; " + said
    turn.last.op = turn.last.op.model_copy(update={"content": content})


# A sentence without its subject that only says more about the memory just made: "Started during
# lockdown when my back gave out.", "Helped a lot with my back pain.", "Finished in 3:41.", "Has done
# for thirty years.", "Named after the chocolate.": a past or auxiliary verb, then no thing of its
# own (a preposition, an adverb, "it"), and no name ("Moved to Cardiff in March." is news of its own).
_AUXILIARY = grammar.word_set("has have had was were didn't doesn't don't wasn't hasn't haven't")
_NO_OBJECT = grammar.word_set(
    "in on at for during after before since when while until with without by from to about into over "
    "through around back up out off down a lot so too again already it that this them there all ever"
)
_NAME = re.compile(r"(?<=\s)[A-Z][a-z]")


def _subjectless_more(text: str, turn: Turn) -> bool:
    words = text.split()
    at = 0
    while at < len(words) - 1 and grammar.is_adverb(words[at].lower().strip(",")):
        at += 1
    if turn.last is None or not turn.whole_sentence or len(words) - at < 2 or _NAME.search(text):
        return False
    if text.rstrip().endswith(("!", "?")) or _VERDICT.search(text):
        return False  # "Had a blast!", "Was so good.": a reaction, which makes a memory only longer
    head, after = words[at].lower().strip(","), words[at + 1].lower().strip(",.")
    if head in ("i", "we") or not (head in _AUXILIARY or grammar.is_past(head)):
        return False
    return after in _NO_OBJECT or head in _AUXILIARY or grammar.is_past(after)


def clause(text: str, raw: str, turn: Turn) -> None:
    """One clause (``raw``: its whole sentence as said); an elaboration ("found out the hard way at
    a street food stall") joins the memory the clause before it made, and makes none of its own."""
    elaboration = strip_lead(text)
    # Only the speaker's own words point back: "keep it up!", "can't wait to hear about it!" are
    # said to the listener, and make no memory either way.
    # A clause that points back to a deletion ("Running isn't for me anymore, my knees hate it") says
    # something of its own.
    points_back = (
        turn.last is not None
        and bool(turn.last.op.content)
        and bool(
            _POINTS_BACK.search(elaboration)
            or (_ENDS_POINTING_BACK.search(elaboration) and len(elaboration.split()) <= _SHORT)
        )
        and (is_first_person(elaboration) or grammar.is_past(elaboration.split()[0]))
    )
    last = turn.last if turn.last is not None and turn.last.op.content else None
    room = last is not None and len(last.op.content or "") + len(elaboration) <= _JOINED_MAX_CHARS
    explained = _ELABORATION.match(elaboration) or points_back or (room and _fragment(elaboration))
    if not explained and room and last is not None and _subjectless_more(elaboration, turn):
        _join_as_is(elaboration, last, turn)
        return
    if explained:
        if grammar.is_past(elaboration.split()[0]):
            elaboration = "I " + elaboration[:1].lower() + elaboration[1:]  # "Learned that the hard way"
        if last is not None:
            _join(elaboration, turn)
        return
    made = len(turn.decisions)
    statement(text, raw, turn)
    if len(turn.decisions) > made:
        turn.last = turn.decisions[-1]
    elif room and _says_more(elaboration, turn):
        _join(elaboration, turn)  # turn.last stays: what follows may say more about it still
    else:
        turn.last = None


def drop_announcements(turn: Turn, start: int) -> None:
    """ "I switched careers, I'm a paramedic now": the first clause only announces the update beside it."""
    made = turn.decisions[start:]
    if not any(d.op.op == "UPDATE" for d in made):
        return
    turn.decisions[start:] = [
        d for d in made if not (d.op.op == "ADD" and len(topic(d.op.content or "", turn.subject)) < 2)
    ]
