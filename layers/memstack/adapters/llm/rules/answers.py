"""An answer completed from the question it answers: a fact said across two turns.

"Where are you based?" - "Just outside Utrecht." says "I'm based just outside Utrecht.";
"Do you have any pets?" - "Two rabbits." says "I have two rabbits."; "Are you still on
nights?" - "Yes, four a week." says "I'm still on nights, four a week." The question is
turned into the speaker's own statement (its "you" becomes "I") with the answer in the
place the question asked about; the extractor then reads it like anything else the
speaker said. Only a fragment is completed: an answer with a subject of its own
("I moved last year", "Kenji does") says what it says.
"""

from __future__ import annotations

import re

import lemminflect

from memstack.adapters.llm.rules import grammar
from memstack.adapters.llm.rules.grammar import word_set

_OPENER = re.compile(
    r"^(?:(?:so|and|ok|okay|great|nice|cool|sure|also|oh|well|got it|thanks|thank you|good question|"
    r"out of curiosity|just curious|quick question|by the way|btw)[,!.:]?\s+)+",
    re.IGNORECASE,
)
# "..., so I can suggest meetups?": why the question is asked, not what it asks.
_PURPOSE = re.compile(r",?\s+(?:so that|so|because|since|if|in case|just so)\b.*$", re.IGNORECASE)
# "Which runtime is it on, and what are the limits?": the answer's first part answers the first.
_SECOND_QUESTION = re.compile(r",?\s+and\s+(?:what|which|who|where|when|how|do|does|did|are|is)\b.*$", re.I)
_YES = re.compile(
    r"^(?:yes|yeah|yep|yup|definitely|absolutely|of course|correct|indeed|I do|I am|I have|still)\b"
    r"[,.!:;]?\s*",
    re.IGNORECASE,
)
_NO = re.compile(r"^(?:no|nope|not really|nah|not anymore|not any more)\b", re.IGNORECASE)
_PREPOSITIONS = word_set("on with in at for about to from into of by")
# Time words that may follow a stranded preposition: "what do you work on day to day?"
_WHEN = re.compile(
    r"^(?:day to day|these days|right now|at the moment|nowadays|now|lately|currently|usually|mostly|"
    r"most days|every day|at work|for work)$",
    re.IGNORECASE,
)
_LOCATIVE = re.compile(
    r"^(?:in|at|on|near|outside|inside|close to|just|right|around|by|from|to|downtown|up|down|over|across|"
    r"between|here|there|home|abroad|overseas|remote\w*)\b",
    re.IGNORECASE,
)
_AUX = word_set(
    "am is are was were has have had do does did will would can could shall should may might must"
)
_SUBJECT_WORDS = word_set("he she it they there this that these those we you i")
# A subject of the speaker's own ("my partner and two cats" is still a fragment).
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|myself|we|we're|we've|us)\b", re.IGNORECASE)


def question_of(text: str) -> str | None:
    """The question a turn ends on: its last sentence with a question mark, without openers and the
    reason it was asked ("Good question. Where are you based, so I can ...?" -> "where are you based")."""
    asked = [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s.rstrip().endswith("?")]
    if not asked:
        return None
    question = _OPENER.sub("", asked[-1].strip().rstrip("?").strip())
    question = _PURPOSE.sub("", question).strip()
    question = _SECOND_QUESTION.sub("", question).strip()
    return question[:1].lower() + question[1:] if question else None


def _first_person(words: str) -> str:
    """The question's "your"/"yourself" as the speaker says them."""
    words = re.sub(r"\byourself\b", "myself", words, flags=re.IGNORECASE)
    words = re.sub(r"\byours\b", "mine", words, flags=re.IGNORECASE)
    words = re.sub(r"\byour\b", "my", words, flags=re.IGNORECASE)
    return re.sub(r"\byou\b", "me", words, flags=re.IGNORECASE)


def as_speaker(question: str) -> str:
    """The question in the words of the one it is put to: "how's your brother doing" -> "how's my
    brother doing"."""
    return _first_person(question)


def _past(verb: str) -> str:
    forms = lemminflect.getInflection(verb.lower(), tag="VBD")
    return forms[0] if forms else verb


def is_fragment(answer: str) -> bool:
    """An answer without a subject of its own: a noun phrase, a place, a time ("Helix, with
    rust-analyzer", "Just outside Utrecht", "About four years now")."""
    tokens = re.findall(r"[\w'-]+", answer)
    if not tokens or len(tokens) > 25 or _FIRST_PERSON.search(answer):
        return False
    if tokens[0].lower() in _SUBJECT_WORDS or any(t.lower() in _AUX for t in tokens):
        return False
    first = next((t.lower() for t in tokens if not grammar.is_adverb(t)), tokens[0].lower())
    gerund = first.endswith("ing") and grammar.lemma(first) != first
    if gerund or (grammar.is_verb(first) and not grammar.tags(first) & {"NOUN", "ADJ", "ADV"}):
        return False  # "Building pipelines", "Moved to Cardiff": a verb, read elsewhere
    # "Our pods keep restarting": the speaker's thing, then its verb: a subject of its own.
    if tokens[0].lower() in ("my", "our") and any(
        _finite(t, tokens[i - 1]) for i, t in enumerate(tokens) if 2 <= i < 4
    ):
        return False
    # "Kenji handles the backend": a finite verb after a subject of its own.
    second = tokens[1].lower() if len(tokens) > 1 else ""
    return not (
        grammar.is_verb(second)
        and not grammar.tags(second) & {"NOUN", "ADJ"}
        and second.endswith(("s", "ed"))
    )


def _finite(word: str, before: str) -> bool:
    """A verb that is not also a noun or adjective ("runs", "moved"; not "cache", "home"), or a bare
    verb after a plural ("pods keep")."""
    low = word.lower()
    if not grammar.is_verb(low) or low.endswith("ing"):
        return False
    plural_subject = before.lower().endswith("s") and grammar.is_base(low)
    return plural_subject or not grammar.tags(low) & {"NOUN", "ADJ"}


def _split_stranded(rest: list[str]) -> tuple[list[str], list[str]]:
    """``rest`` cut after a stranded preposition ("work on | day to day"), else after its verb."""
    for i, word in enumerate(rest):
        if word.lower() in _PREPOSITIONS and (i == len(rest) - 1 or _WHEN.match(" ".join(rest[i + 1 :]))):
            return rest[: i + 1], rest[i + 1 :]
    return rest[:1], rest[1:]


def _join(*parts: str) -> str:
    return " ".join(p.strip() for p in parts if p and p.strip())


def complete(question: str, answer: str) -> str | None:
    """The speaker's statement that ``answer`` makes of ``question`` (from ``question_of``), or None."""
    answer = answer.strip()
    end = answer[-1] if answer[-1:] in ".!" else "."
    body = answer.rstrip(".!").strip()
    if not body or _NO.match(body):
        return None
    if yes := _YES.match(body):
        return _yes(question, body[yes.end() :].strip(), end)
    if not is_fragment(body):
        # "End of November, and the trip is in January.": the answer, then something of its own.
        head, comma, rest = body.partition(",")
        if not comma or not is_fragment(head) or not (said := complete(question, head + end)):
            return None
        return said.rstrip(".!") + "," + rest + end
    body = body[:1].lower() + body[1:] if not _proper(body) else body
    return _wh(question, body, end)


def _proper(text: str) -> bool:
    first, *rest = text.split()
    if rest and first[:1].isupper() and rest[0][:1].isupper() and not grammar.is_adverb(first):
        return True  # "Spring Boot", "Google Cloud": a name of more than one word
    return first[:1].isupper() and first.lower() not in _FUNCTION and not grammar.tags(first.lower())


_FUNCTION = word_set("a an the my our some any")


def _yes(question: str, rest: str, end: str) -> str | None:
    m = re.match(r"^(do|did|are|were|have|can|will|would)\s+you\s+(?:ever\s+)?(.+)$", question, re.IGNORECASE)
    if m is None:
        return None
    aux, said = m.group(1).lower(), _first_person(m.group(2))
    if re.search(r"\b(?:it|that|this|them|those|these)\b", said, re.IGNORECASE):
        return None  # "Do you enjoy it?" - "Yeah, most days.": what "it" is, the question does not say
    if aux == "did":
        verb, _, tail = said.partition(" ")
        said = _join(_past(verb), tail)
    lead = {"do": "I", "did": "I", "are": "I'm", "were": "I was", "have": "I've", "can": "I can"}.get(aux)
    lead = lead or f"I {aux}"
    if rest and not is_fragment(rest):
        rest = ""  # "Yes, I moved last year": the rest says itself
    statement = _join(lead, said) + (f", {rest[:1].lower() + rest[1:]}" if rest else "")
    return statement + end


# "where is my daughter going", "when does my passport expire": a question about the speaker's own
# person or thing (``mentions.question_subject``), with the verb it asks about.
_THEIRS = re.compile(
    r"^(?P<wh>where|when)\s+(?P<aux>is|are|was|were|does|do|did|will)\s+(?P<who>my\s+[\w'-]+(?:\s+[A-Z][\w'-]*)?)"
    r"\s+(?P<verb>[a-z]+)(?P<rest>(?:\s+[\w'-]+)*)$",
    re.IGNORECASE,
)
# Verbs of going somewhere: the place they are asked about is where they go to.
_GOING = word_set("go going move moving fly flying head heading travel travelling relocate relocating")


def _about_theirs(question: str, answer: str, end: str) -> str | None:
    m = _THEIRS.match(question)
    if m is None:
        return None
    aux, verb, who = m.group("aux").lower(), m.group("verb"), "My" + m.group("who")[2:]
    if aux in ("does", "do", "did"):
        verb = grammar.third_person(verb) if aux == "does" else _past(verb) if aux == "did" else verb
        aux = ""
    if m.group("wh").lower() == "where" and not _LOCATIVE.match(answer):
        answer = ("to " if verb.lower() in _GOING else "in ") + answer
    return _join(who, aux, verb, m.group("rest"), answer) + end


def _wh(question: str, answer: str, end: str) -> str | None:
    if m := re.match(r"^(?:what|who|which)(?:'s|\s+is|\s+was)\s+your\s+(.+)$", question, re.IGNORECASE):
        return f"My {_first_person(m.group(1))} is {answer}{end}"
    if m := re.match(r"^(?:what|who|which)(?:'re|\s+are)\s+your\s+(.+)$", question, re.IGNORECASE):
        return f"My {_first_person(m.group(1))} are {answer}{end}"
    # "Which runtime is the service on?" - "Spring Boot 3": "My service is on Spring Boot 3."
    if m := re.match(
        r"^(?:what|which)\s+[\w-]+(?:\s+[\w-]+)?\s+(is|are)\s+(?:the|your)\s+([\w-]+(?:\s+[\w-]+)??)"
        r"\s+((?:\w+\s+)?(?:on|in|with))$",
        question,
        re.IGNORECASE,
    ):
        thing, verb, place = _first_person(m.group(2)), m.group(1).lower(), m.group(3)
        return f"My {thing} {verb} {place} {answer}{end}"
    if theirs := _about_theirs(question, answer, end):
        return theirs
    if m := re.match(r"^where\s+(do|did|are|were)\s+you\s+(.+)$", question, re.IGNORECASE):
        aux, rest = m.group(1).lower(), _first_person(m.group(2)).split()
        place = answer if _LOCATIVE.match(answer) else f"in {answer}"
        if rest[-1].lower() in ("from", "to"):
            place = answer  # "where are you from": the preposition is the question's
        if aux in ("do", "did"):
            verb = _past(rest[0]) if aux == "did" else rest[0]
            return _join("I", verb, *rest[1:], place) + end
        return _join("I'm" if aux == "are" else "I was", *rest, place) + end
    if m := re.match(r"^how long\s+(?:have|had)\s+you\s+(.+)$", question, re.IGNORECASE):
        span = answer if re.match(r"^(?:for|since|ever since)\b", answer, re.I) else f"for {answer}"
        return _join("I've", _first_person(m.group(1)), span) + end
    if m := re.match(r"^(?:how|when)\s+(do|did)\s+you\s+(.+)$", question, re.IGNORECASE):
        verb, _, words = _first_person(m.group(2)).partition(" ")
        return _join("I", _past(verb) if m.group(1).lower() == "did" else verb, words, answer) + end
    if m := re.match(
        r"^(?:what|which|who)((?:\s+[\w'-]+){0,4}?)\s+(do|did|are|were|have)\s+you\s+(.+)$",
        question,
        re.IGNORECASE,
    ):
        aux, rest = m.group(2).lower(), _first_person(m.group(3)).split()
        head, tail = _split_stranded(rest)
        if aux in ("do", "did"):
            said = [w for w in answer.split() if not grammar.is_adverb(w)]
            if head == ["do"] and said and (said[0] in ("a", "an") or said[0].endswith("ing")):
                return _join("I'm", answer, *tail) + end  # "what do you do?" - "a nurse"
            if aux == "did":
                head = [_past(head[0]), *head[1:]]
            return _join("I", *head, answer, *tail) + end
        lead = {"are": "I'm", "were": "I was", "have": "I've"}[aux]
        if aux == "have" and head and head[0] == "been" and len(rest) > 1:
            head, tail = _split_stranded(rest[1:])
            head = ["been", *head]
        return _join(lead, *head, answer, *tail) + end
    if m := re.match(r"^(?:do|did|have)\s+you\s+(?:still\s+)?(?:got\s+)?(\w+)\b", question, re.IGNORECASE):
        verb = m.group(1)
        if question.lower().startswith("did"):
            verb = _past(verb)
        return _join("I", verb, answer) + end  # "do you have any pets?" - "two rabbits"
    return None
