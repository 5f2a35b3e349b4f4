"""The LoCoMo data format (Maharana et al., ACL 2024): conversations, sessions, turns, questions.

A file is a JSON list of samples. Each has ``conversation`` (``speaker_a``,
``speaker_b``, ``session_N`` turn lists and ``session_N_date_time`` strings)
and ``qa`` (``question``, ``answer`` or ``adversarial_answer``, ``evidence``
dialog ids like ``D3:5``, ``category`` 1-5). Evidence ids in the wild are
sometimes malformed (``D:11:26``, ``D30:05``, ``D8:6; D9:17``); they are
normalised here, and ids naming no turn of the conversation are dropped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstack.models import Role

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_SESSION = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)", re.I)


class LocomoFormatError(ValueError):
    """The file is not in the LoCoMo format; the message says where."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    speaker: str | None
    text: str
    timestamp: datetime
    caption: str | None = None
    #: LoCoMo's two people are both users of the agent; BEAM's turns are user or assistant
    role: Role = Role.USER

    @property
    def content(self) -> str:
        """The turn as a message: its text, and what an image turn showed."""
        if self.caption:
            return (
                f"{self.text} [shares a photo: {self.caption}]"
                if self.text
                else f"[shares a photo: {self.caption}]"
            )
        return self.text


@dataclass(frozen=True)
class Question:
    text: str
    #: LoCoMo's code (1-5), or a benchmark's category name
    category: int | str
    evidence: tuple[str, ...]
    #: evidence ids the file gives that name no turn (after normalisation)
    dropped_evidence: tuple[str, ...] = ()
    #: named parts of the evidence (BEAM: ``original_info`` / ``updated_info`` of a knowledge update)
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: False for a question the conversation cannot answer (BEAM's abstention): no evidence
    answerable: bool = True

    @property
    def category_name(self) -> str:
        if isinstance(self.category, str):
            return self.category
        return CATEGORIES.get(self.category, f"category-{self.category}")


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]
    #: questions left out because none of their evidence names a turn
    unusable: int = 0
    sessions: dict[int, datetime] = field(default_factory=dict)

    @property
    def last_session_time(self) -> datetime:
        return max(self.sessions.values())


def normalise_evidence(raw: str) -> list[str]:
    """Dialog ids in canonical ``D<session>:<turn>`` form (no leading zeros), in order.

    ``"D:11:26"`` → ``["D11:26"]``, ``"D30:05"`` → ``["D30:5"]``,
    ``"D8:6; D9:17"`` → ``["D8:6", "D9:17"]``, ``"D"`` → ``[]``.
    """
    return [f"D{int(s)}:{int(t)}" for s, t in _EVIDENCE.findall(str(raw))]


def parse_session_time(value: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware UTC datetime (dateparser for other spellings)."""
    text = " ".join(value.split())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    import dateparser

    parsed = dateparser.parse(text.replace(" on ", " "), languages=["en"])
    if parsed is None:
        raise LocomoFormatError(f"cannot read the session date {value!r}")
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _canonical(dia_id: str) -> str:
    ids = normalise_evidence(dia_id)
    return ids[0] if ids else dia_id


def parse_conversation(sample: dict[str, Any], index: int) -> Conversation:
    where = f"sample {index}"
    try:
        conv = sample["conversation"]
        sample_id = str(sample.get("sample_id", f"conv-{index}"))
        where = sample_id
        speakers = (str(conv["speaker_a"]), str(conv["speaker_b"]))
    except (KeyError, TypeError) as exc:
        raise LocomoFormatError(f"{where}: missing {exc}") from None
    sessions: dict[int, datetime] = {}
    turns: list[Turn] = []
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION.match(key)))
    for n in numbers:
        session_turns = conv[f"session_{n}"]
        if not session_turns:
            continue
        stamp = conv.get(f"session_{n}_date_time")
        if not stamp:
            raise LocomoFormatError(f"{where}: session_{n} has no session_{n}_date_time")
        sessions[n] = parse_session_time(stamp)
        for pos, t in enumerate(session_turns):
            try:
                caption = t.get("blip_caption")
                turns.append(
                    Turn(
                        dia_id=_canonical(str(t["dia_id"])),
                        session=n,
                        speaker=str(t["speaker"]),
                        text=str(t.get("text") or ""),
                        timestamp=sessions[n],
                        caption=str(caption) if caption else None,
                    )
                )
            except (KeyError, TypeError, AttributeError) as exc:
                raise LocomoFormatError(f"{where}: session_{n} turn {pos}: missing {exc}") from None
    if not turns:
        raise LocomoFormatError(f"{where}: no turns")
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    unusable = 0
    for pos, qa in enumerate(sample.get("qa", [])):
        try:
            evidence = [e for raw in qa.get("evidence", []) for e in normalise_evidence(raw)]
            usable = tuple(dict.fromkeys(e for e in evidence if e in known))
            dropped = tuple(e for e in evidence if e not in known)
            if not usable:
                unusable += 1
                continue
            questions.append(Question(str(qa["question"]), int(qa["category"]), usable, dropped))
        except (KeyError, TypeError, ValueError) as exc:
            raise LocomoFormatError(f"{where}: qa {pos}: bad or missing {exc}") from None
    return Conversation(sample_id, speakers, turns, questions, unusable, sessions)


def load_locomo(path: Path | str) -> list[Conversation]:
    """Read a LoCoMo JSON file; raises ``LocomoFormatError`` or ``OSError`` with a clear message."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LocomoFormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise LocomoFormatError(f"{path}: expected a list of LoCoMo samples")
    return [parse_conversation(sample, i) for i, sample in enumerate(data)]
