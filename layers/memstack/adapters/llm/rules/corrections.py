"""A correction replaces what was wrong: "Sorry, I meant Hannah, not Anna", "Actually it's Stripe,
not Shopify", "Actually, I work at the library" (no "not Y": the statement replaces the memory
about the same thing)."""

from __future__ import annotations

import re

from memstack.adapters.llm.rules import cues
from memstack.adapters.llm.rules.clauses import clause
from memstack.adapters.llm.rules.decisions import attribute_update, update
from memstack.adapters.llm.rules.sentences import strip_lead
from memstack.adapters.llm.rules.statements import rewrite
from memstack.adapters.llm.rules.targets import best_target, editable, same_category_preference
from memstack.adapters.llm.rules.turn import CORRECTION, Said, Turn
from memstack.domain.text import STOPWORDS, words
from memstack.models import Kind


def correction(sentence: str, turn: Turn) -> bool:
    """ "Sorry, I meant Hannah, not Anna", "Actually it's Stripe, not Shopify": replace what was wrong."""
    body = cues.CORRECTION_PREAMBLE.sub("", sentence).strip()
    body = strip_lead(body) if body else body
    if not body:
        return False
    m = cues.NOT_THAT.match(body)
    if m is None:
        return _corrected_statement(body, turn)
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
        said = Said(main, content, target.kind, filed, None)
    else:
        said = rewrite(main, turn)
    update(turn, target, said, CORRECTION)
    return True


def _corrected_statement(body: str, turn: Turn) -> bool:
    """A correction without "not Y": the statement replaces the memory about the same thing."""
    first = cues.clauses(body)[0]
    said = rewrite(first, turn)
    if attribute_update(said, turn):
        return True
    taken = turn.taken()
    target = best_target(said.text, turn.neighbours, turn.subject, exclude=taken)
    if target is None and said.kind == Kind.PREFERENCE:
        target = same_category_preference(said.text, turn.neighbours, taken)
    if target is None:
        return False
    update(turn, target, said, CORRECTION)
    for rest in cues.clauses(body)[1:]:
        clause(rest, rest, turn)
    return True


def _mentions(text: str, phrase: str) -> bool:
    core = [w for w in words(phrase) if w not in STOPWORDS and w not in ("one", "the")]
    core = [re.sub(r"(?<=\d)(?:st|nd|rd|th)$", "", w) for w in core]
    return bool(core) and all(re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE) for w in core)


def _replace_phrase(text: str, old: str, new: str) -> str:
    core = " ".join(w for w in old.split() if w.lower() not in ("a", "an", "the"))
    out = re.sub(rf"\b{re.escape(core)}\b", new, text, count=1, flags=re.IGNORECASE)
    return out if out != text else text
