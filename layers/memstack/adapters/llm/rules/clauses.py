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
from memstack.adapters.llm.rules.sentences import strip_lead
from memstack.adapters.llm.rules.statements import rewrite, statement
from memstack.adapters.llm.rules.targets import topic
from memstack.adapters.llm.rules.turn import Turn

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


def clause(text: str, raw: str, turn: Turn) -> None:
    """One clause (``raw``: its whole sentence as said); an elaboration ("found out the hard way at
    a street food stall") joins the memory the clause before it made, and makes none of its own."""
    elaboration = strip_lead(text)
    if _ELABORATION.match(elaboration):
        if grammar.is_past(elaboration.split()[0]):
            elaboration = "I " + elaboration[:1].lower() + elaboration[1:]  # "Learned that the hard way"
        if turn.last is not None and turn.last.op.content:
            said = rewrite(elaboration, turn).text
            if said.split()[0].lower() in _LOWER_OPENINGS:
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
