"""A message cut into sentences, and a sentence without its greetings and fillers."""

from __future__ import annotations

import re

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
