"""Extraction scenarios: a short conversation and what memstack should know at its end.

One scenario per JSON line::

    {"id": "move-1", "tags": ["update"], "user": "kim",
     "messages": [{"role": "user", "speaker": "Kim", "content": "...", "timestamp": "..."}, ...],
     "expect": {"current": ["Osaka"], "absent": ["Tokyo"], "history": [["Tokyo", "Osaka"]],
                "search": [{"query": "where does Kim live now", "top1": "Osaka"}],
                "dated": [["Osaka", "2024-01-08"]]}}

``check`` scores the final state of a store against ``expect``; every phrase
is matched case-insensitively as a substring of memory text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memstack.models import MemoryRecord, Message

TAGS = ("add", "update", "delete", "preference", "event", "fact", "noise", "correction", "multi-turn")


class ScenarioFormatError(ValueError):
    """A scenario file that is not what ``load_scenarios`` reads (the message names file and line)."""


class SearchExpectation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    top1: str = Field(min_length=1)


class Expectations(BaseModel):
    model_config = ConfigDict(extra="forbid")

    current: list[str] = Field(default_factory=list)
    absent: list[str] = Field(default_factory=list)
    history: list[tuple[str, str]] = Field(default_factory=list)
    search: list[SearchExpectation] = Field(default_factory=list)
    #: (phrase, YYYY-MM-DD): a current memory with the phrase has an event time on that (UTC) day
    dated: list[tuple[str, date]] = Field(default_factory=list)


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    user: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    expect: Expectations
    #: the file it came from (set by the loader)
    source: str = ""


def load_scenarios(paths: list[Path]) -> list[Scenario]:
    """Every scenario of every file, in order; a bad line or a repeated id is one clear error."""
    out: list[Scenario] = []
    seen: dict[str, str] = {}
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ScenarioFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
        for number, line in enumerate(lines, start=1):
            if not line.strip() or line.lstrip().startswith("//"):
                continue
            where = f"{path}:{number}"
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ScenarioFormatError(f"{where}: not JSON ({exc.msg})") from None
            if not isinstance(data, dict):
                raise ScenarioFormatError(f"{where}: a scenario is a JSON object")
            try:
                scenario = Scenario.model_validate({**data, "source": path.name})
            except ValidationError as exc:
                first = exc.errors()[0]
                loc = ".".join(str(p) for p in first["loc"])
                raise ScenarioFormatError(f"{where}: {loc}: {first['msg']}") from None
            if scenario.id in seen:
                raise ScenarioFormatError(f"{where}: id {scenario.id!r} already used at {seen[scenario.id]}")
            seen[scenario.id] = where
            out.append(scenario)
    if not out:
        raise ScenarioFormatError("no scenarios in " + ", ".join(str(p) for p in paths))
    return out


@dataclass(frozen=True)
class Check:
    kind: str
    expected: str
    passed: bool
    #: what was found instead, when it failed
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "expected": self.expected, "passed": self.passed, "detail": self.detail}


def _has(text: str, phrase: str) -> bool:
    return phrase.casefold() in text.casefold()


def _chains(records: list[MemoryRecord]) -> list[list[MemoryRecord]]:
    """Version chains (oldest first) of LTM records, linked by ``replaces_id``."""
    by_id = {r.id: r for r in records}
    successor = {r.replaces_id: r for r in records if r.replaces_id in by_id}
    heads = [r for r in records if r.replaces_id not in by_id]
    chains = []
    for head in heads:
        chain, node, seen = [head], head, {head.id}
        while node.id in successor and successor[node.id].id not in seen:
            node = successor[node.id]
            seen.add(node.id)
            chain.append(node)
        chains.append(chain)
    return chains


def check_state(expect: Expectations, ltm: list[MemoryRecord], top1: dict[str, str]) -> list[Check]:
    """Score the store's LTM records (every version) and the top result of each expected search."""
    current = [r.content for r in ltm if r.is_current and not r.deleted]
    checks: list[Check] = []
    for phrase in expect.current:
        ok = any(_has(c, phrase) for c in current)
        checks.append(Check("current", phrase, ok, "" if ok else f"current: {current}"))
    for phrase in expect.absent:
        hits = [c for c in current if _has(c, phrase)]
        checks.append(Check("absent", phrase, not hits, f"still current: {hits}" if hits else ""))
    chains = _chains(ltm)
    for before, after in expect.history:
        ok = any(
            _has(chain[i].content, before) and any(_has(later.content, after) for later in chain[i + 1 :])
            for chain in chains
            for i in range(len(chain))
            if not chain[i].deleted
        )
        shown = [[r.content for r in c] for c in chains if len(c) > 1]
        checks.append(Check("history", f"{before} -> {after}", ok, "" if ok else f"chains: {shown}"))
    for phrase, day in expect.dated:
        with_phrase = [r for r in ltm if r.is_current and not r.deleted and _has(r.content, phrase)]
        days = [r.event_time.astimezone(UTC).date() if r.event_time else None for r in with_phrase]
        ok = day in days
        times = [str(d) if d else "no event_time" for d in days]
        checks.append(Check("dated", f"{phrase} @ {day}", ok, "" if ok else f"event times: {times}"))
    for s in expect.search:
        found = top1.get(s.query, "")
        ok = _has(found, s.top1)
        checks.append(Check("search", f"{s.query!r} -> {s.top1}", ok, "" if ok else f"top1: {found!r}"))
    return checks
