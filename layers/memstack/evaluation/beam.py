"""The BEAM data format (Tavakoli et al., 2025) as the project's development copy holds it.

A file is gzipped (or plain) JSON: ``{"conversations": [{"id", "batches",
"turns", "questions"}]}``. Each turn has an integer ``id``, a ``role`` (user
or assistant), the ``batch`` it was sent in and a ``timestamp``; each
question a ``category`` name (ten of them), the ``evidence`` turn ids and,
for knowledge updates, contradictions and temporal questions, the named
``evidence_groups`` (``original_info`` / ``updated_info``, …). Abstention
questions have no evidence: nothing in the conversation answers them.

They are read into the same ``Conversation`` the LoCoMo harness runs
(``memstack.evaluation.runner``): a batch is a session (one ``add`` call),
turn ids are strings, the role is kept and there is no speaker name (an
agent sending a user–assistant chat sets roles, not names).
"""

from __future__ import annotations

import gzip
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from memstack.evaluation.locomo import Conversation, Question, Turn
from memstack.models import Role

#: the ten BEAM categories, in the order the reports list them
CATEGORIES = (
    "information_extraction",
    "multi_session_reasoning",
    "knowledge_update",
    "temporal_reasoning",
    "event_ordering",
    "contradiction_resolution",
    "preference_following",
    "instruction_following",
    "summarization",
    "abstention",
)
#: the category whose questions the conversation cannot answer
ABSTENTION = "abstention"


class BeamFormatError(ValueError):
    """The file is not in the BEAM development format; the message says where."""


def _time(value: str, where: str) -> datetime:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        raise BeamFormatError(f"{where}: bad timestamp {value!r}") from None


def _ids(values: Any, where: str) -> list[str]:
    """Turn ids as strings, from a list (possibly nested, as event ordering's) of integers."""
    if values is None:
        return []
    if isinstance(values, int | str):
        return [str(values)]
    if not isinstance(values, list):
        raise BeamFormatError(f"{where}: evidence must be a list of turn ids, got {type(values).__name__}")
    return [i for v in values for i in _ids(v, where)]


def _question(raw: dict[str, Any], known: set[str], where: str) -> Question | None:
    """The question; None when it should have evidence and none of it names a turn."""
    category = str(raw["category"])
    evidence = _ids(raw.get("evidence"), where)
    usable = tuple(dict.fromkeys(e for e in evidence if e in known))
    dropped = tuple(e for e in evidence if e not in known)
    groups = {
        str(name): tuple(e for e in dict.fromkeys(_ids(ids, where)) if e in known)
        for name, ids in (raw.get("evidence_groups") or {}).items()
    }
    answerable = category != ABSTENTION
    if answerable and not usable:
        return None
    return Question(str(raw["question"]), category, usable, dropped, groups=groups, answerable=answerable)


def parse_conversation(raw: dict[str, Any], index: int) -> Conversation:
    where = f"conversation {index}"
    try:
        conv_id = str(raw["id"])
        where = f"conversation {conv_id}"
        raw_turns = raw["turns"]
        raw_questions = raw["questions"]
    except (KeyError, TypeError) as exc:
        raise BeamFormatError(f"{where}: missing {exc}") from None
    turns: list[Turn] = []
    sessions: dict[int, datetime] = {}
    for pos, t in enumerate(raw_turns):
        try:
            batch = int(t["batch"])
            stamp = _time(t["timestamp"], f"{where} turn {pos}")
            role = Role(str(t["role"]))
            turns.append(Turn(str(t["id"]), batch, None, str(t["content"]), stamp, role=role))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, BeamFormatError):
                raise
            raise BeamFormatError(f"{where} turn {pos}: bad or missing {exc}") from None
        # A batch's time is its last turn's: the search after it sees every turn as past.
        sessions[batch] = max(sessions.get(batch, stamp), stamp)
    if not turns:
        raise BeamFormatError(f"{where}: no turns")
    known = {t.dia_id for t in turns}
    questions: list[Question] = []
    unusable = 0
    for pos, q in enumerate(raw_questions):
        try:
            question = _question(q, known, f"{where} question {pos}")
        except (KeyError, TypeError) as exc:
            raise BeamFormatError(f"{where} question {pos}: bad or missing {exc}") from None
        if question is None:
            unusable += 1
        else:
            questions.append(question)
    return Conversation(conv_id, ("user", "assistant"), turns, questions, unusable, sessions)


def load_beam(path: Path | str) -> list[Conversation]:
    """Read a BEAM file (``.json.gz`` or ``.json``); raises ``BeamFormatError`` or ``OSError``."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise BeamFormatError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except (gzip.BadGzipFile, EOFError) as exc:
        raise BeamFormatError(f"{path}: not a readable gzip file ({exc})") from None
    conversations = data.get("conversations") if isinstance(data, dict) else None
    if not isinstance(conversations, list) or not conversations:
        raise BeamFormatError(f"{path}: expected an object with a list of conversations")
    return [parse_conversation(c, i) for i, c in enumerate(conversations)]
