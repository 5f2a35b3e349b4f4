"""A message cut into sentences, and a sentence without its greetings and fillers."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LEAD = re.compile(
    r"^(?:(?:hi|hello|hey|yes|yeah|yep|no|nope|well|so|oh|ok|okay|actually|anyway|btw|by the way|ah|haha|"
    r"lol|wow|also|and|but|plus|honestly|sure|sorry|oops|correction|no wait|wait|hmm|sadly|luckily|however|"
    r"fine|alright|all right|unfortunately|fortunately|to be honest|tbh|that said|anyways|"
    r"my mistake|my bad|change of plans?|big news|good news|great news|bad news|news|just a reminder|"
    r"reminder|turns out|turned out|it turns out|it turned out|guess what|fun fact|update|in fact)"
    r"\b[,!.:]?\s*"
    r"|[\w' ]{1,24}:\s+|[\w-]+-wise,\s*)",
    re.IGNORECASE,
)


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


# "We're on Rust 1.75 because of a toolchain pin, would that matter?", "I'm deploying on Render,
# can you help me with that": a statement of the speaker's, then a question or a request for the
# listener. The statement stands alone.
_STATEMENT = re.compile(r"^(?:I|I'm|I've|I'd|we|we're|we've|my|our)\b", re.IGNORECASE)
_ASKED_AFTER = re.compile(
    r",\s*(?:and\s+|so\s+|but\s+)?(?:(?:can|could|would|will)\s+you\b[^.!?]*[.!?]?"
    r"|(?:would|will|can|could|does|do|is|isn't|are|should|did|has|have|any|right|or|what|how|which|why|"
    r"thoughts|ideas)\b[^,.!?]*\?)$",
    re.IGNORECASE,
)

# What only leads up to the question: "I'm not sure what's wrong, can you ...", "I've got the following
# code so far, ...".
_PREAMBLE = re.compile(
    r"\b(?:question|wondering|curious|quick one|confused|stuck|not sure|no idea|the following|so far|here's|"
    r"here is|like this|as follows)\b",
    re.IGNORECASE,
)


def without_question(sentence: str) -> str:
    """A statement of the speaker's without the question or request that follows it."""
    if not _STATEMENT.match(sentence) or not (m := _ASKED_AFTER.search(sentence)):
        return sentence
    head = sentence[: m.start()].rstrip()
    if len(head.split()) < 4 or _PREAMBLE.search(head):
        return sentence  # "I have a question, what is X?": nothing said before the question
    return head + "."
