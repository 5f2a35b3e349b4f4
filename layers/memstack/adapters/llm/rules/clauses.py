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
from memstack.adapters.llm.rules.turn import Turn

# What only says more about the clause before it: "(I) found out the hard way at a street food
# stall", "It was my grandfather's", "which is why ...", "mostly so I can ...", "Best decision I ever
# made." It joins that clause's memory.
_ELABORATION = re.compile(
    r"^(?:(?:I|we)\s+)?(?:found out|learned|learnt|discovered|realised|realized|"
    r"(?:figured|found|worked) (?:it|that|this) out)"
    r"(?:\s+(?:that|it|this))?(?=\s*(?:[,.;!]|$)|\s+(?:the hard way|when|after|at|in|on|during|from|last|"
    r"years?|early|quickly|back|recently|while|because)\b)"
    r"|^(?:that|this|it)(?:'s|\s+is|\s+was|\s+has been|\s+happened|\s+started|\s+began|\s+came)\b"
    r"|^(?:which|because|since then|ever since|especially|that's why|hence|so that|in order to|"
    r"the reason being|thanks to)\b"
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
_LOWER_OPENINGS = grammar.word_set("it that this which because since ever especially mainly mostly hence the")


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
    if _ELABORATION.match(elaboration) or points_back:
        if grammar.is_past(elaboration.split()[0]):
            elaboration = "I " + elaboration[:1].lower() + elaboration[1:]  # "Learned that the hard way"
        if turn.last is not None and turn.last.op.content:
            said = rewrite(with_references(elaboration, turn), turn).text
            first = said.split()[0]
            if first.lower() in _LOWER_OPENINGS or (first != "I" and grammar.tags(first.lower())):
                said = said[:1].lower() + said[1:]
            content = turn.last.op.content.rstrip(".!") + "; " + said
            turn.last.op = turn.last.op.model_copy(update={"content": content})
        return
    made = len(turn.decisions)
    statement(text, raw, turn)
    turn.last = turn.decisions[-1] if len(turn.decisions) > made else None


def drop_announcements(turn: Turn, start: int) -> None:
    """ "I switched careers, I'm a paramedic now": the first clause only announces the update beside it."""
    made = turn.decisions[start:]
    if not any(d.op.op == "UPDATE" for d in made):
        return
    turn.decisions[start:] = [
        d for d in made if not (d.op.op == "ADD" and len(topic(d.op.content or "", turn.subject)) < 2)
    ]
