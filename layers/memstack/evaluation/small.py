"""``memstack eval small``: ranking on small, mixed stores, as a new user's first agent builds them.

LoCoMo and BEAM give each user hundreds to thousands of records, all made by
extraction from turns with speaker names. A new integration looks different:
a user with a dozen turns sent as role "user" (often without a name), next to
memories the agent wrote directly (``put_key``, a LangGraph store's ``put``,
an import) that have no source turn. One scenario per JSON line::

    {"id": "rita", "user": "rita", "speaker": null, "batches": [4, 6],
     "turns": ["I just got promoted ...", {"role": "assistant", "text": "..."}, ...],
     "direct": {"car": "Rita drives a red Fiat Panda."},
     "questions": [["what car does Rita drive?", "Fiat Panda"], ["what is her blood type?", null]]}

``turns`` are sent in ``batches`` (sizes; default one ``add`` of them all),
``sync=True``, extraction on; then each ``direct`` memory is written by key.
A question names its answer by a phrase found in exactly one turn or direct
memory (null: nothing answers it); a hit is right when it *is* that item or
was extracted from it (its source turns). Figures: hit@1, hit@3, MRR@10,
split by whether the answer is a direct memory or a turn, and how well the
scores separate: the AUROC of a hit's score for being right (over every
returned hit of every answerable question, so across queries: what a
threshold sees), the AUROC of the top score for answerable against
unanswerable questions, and the median score of right and wrong first hits.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memstack.domain.keyed import KEY_FIELD
from memstack.domain.retrieval.types import SearchHit, SearchRequest
from memstack.evaluation.separation import auroc
from memstack.factory import build_service
from memstack.models import MemoryFilters, Message, Role
from memstack.ports.embedder import Embedder
from memstack.service import MemoryService
from memstack.settings import Settings

TENANT = "eval"
TOP_K = 10

Progress = Callable[[int], None]


class SmallFormatError(ValueError):
    """A scenario file that is not what ``load_small`` reads (the message names file and line)."""


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = Role.USER
    text: str = Field(min_length=1)


class SmallScenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    user: str = Field(min_length=1)
    speaker: str | None = None
    batches: list[int] | None = None
    turns: list[str | Turn] = Field(default_factory=list)
    direct: dict[str, str] = Field(default_factory=dict)
    questions: list[tuple[str, str | None]] = Field(min_length=1)

    def turn_list(self) -> list[Turn]:
        return [t if isinstance(t, Turn) else Turn(text=t) for t in self.turns]

    def items(self) -> dict[str, str]:
        """Every answerable item by id: ``t<i>`` the i-th turn, ``k:<key>`` a direct memory."""
        out = {f"t{i}": t.text for i, t in enumerate(self.turn_list())}
        out.update({f"k:{key}": text for key, text in self.direct.items()})
        return out

    def answer(self, phrase: str | None) -> str | None:
        """The one item whose text holds ``phrase`` (case-insensitive); None for an unanswerable question."""
        if phrase is None:
            return None
        found = [i for i, text in self.items().items() if phrase.lower() in text.lower()]
        if len(found) != 1:
            raise ValueError(f"{self.id}: {phrase!r} is in {len(found)} items, not exactly one")
        return found[0]


def load_small(path: Path) -> list[SmallScenario]:
    out: list[SmallScenario] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            scenario = SmallScenario.model_validate(json.loads(line))
            for _, phrase in scenario.questions:
                scenario.answer(phrase)
            if scenario.batches is not None and sum(scenario.batches) != len(scenario.turns):
                raise ValueError(f"{scenario.id}: batches add up to {sum(scenario.batches)}, not the turns")
        except (json.JSONDecodeError, ValidationError, ValueError) as exc:
            raise SmallFormatError(f"{path}:{n}: {exc}") from None
        out.append(scenario)
    if not out:
        raise SmallFormatError(f"{path}: no scenarios")
    return out


@dataclass
class QuestionResult:
    scenario: str
    query: str
    answer: str | None
    #: ``direct`` or ``turn`` (None: unanswerable)
    kind: str | None
    rank: int | None
    top_score: float
    #: per returned hit: (content, score, right)
    hits: list[tuple[str, float, bool]] = field(default_factory=list)


@dataclass
class SmallReport:
    scenarios: int
    records: int
    questions: int
    metrics: dict[str, float | None]
    by_kind: dict[str, dict[str, float]]
    seconds: float
    results: list[QuestionResult]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["results"] = [asdict(r) for r in self.results]
        return out

    @property
    def misses(self) -> list[QuestionResult]:
        return [r for r in self.results if r.answer is not None and r.rank != 1]


def _items_of(hit: SearchHit, message_ids: dict[str, str]) -> set[str]:
    """The scenario items a hit is, or was extracted from."""
    record = hit.record
    out = {message_ids[s] for s in record.source_ids if s in message_ids}
    key = record.metadata.get(KEY_FIELD)
    if isinstance(key, str):
        out.add(f"k:{key}")
    return out


def run_scenario(
    scenario: SmallScenario, settings: Settings, embedder: Embedder, data_dir: Path
) -> tuple[list[QuestionResult], int]:
    service = build_service(settings.model_copy(update={"data_dir": data_dir}), embedder=embedder)
    turns = scenario.turn_list()
    messages = [
        Message(
            id=f"m{i}", role=t.role, speaker=scenario.speaker if t.role == Role.USER else None, content=t.text
        )
        for i, t in enumerate(turns)
    ]
    message_ids = {m.id: f"t{i}" for i, m in enumerate(messages)}
    results: list[QuestionResult] = []
    try:
        start = 0
        for size in scenario.batches or ([len(messages)] if messages else []):
            service.add(TENANT, scenario.user, messages[start : start + size], sync=True)
            start += size
        for key, text in scenario.direct.items():
            service.put_key(TENANT, scenario.user, key, text)
        records = _count(service, scenario.user)
        for query, phrase in scenario.questions:
            answer = scenario.answer(phrase)
            found = service.search(
                SearchRequest(tenant=TENANT, user_id=scenario.user, query=query, top_k=TOP_K)
            )
            hits = [(h.record.content, h.score, answer in _items_of(h, message_ids)) for h in found.hits]
            rank = next((i + 1 for i, (_, _, right) in enumerate(hits) if right), None)
            kind = None if answer is None else "direct" if answer.startswith("k:") else "turn"
            top = hits[0][1] if hits else 0.0
            results.append(QuestionResult(scenario.id, query, answer, kind, rank, top, hits))
    finally:
        service.close()
    return results, records


def _count(service: MemoryService, user: str) -> int:
    """The user's current records (turns and memories)."""
    n, cursor = 0, None
    while True:
        page, cursor = service.store.list(TENANT, user, MemoryFilters(), 200, cursor)
        n += len(page)
        if not cursor:
            return n


def _rates(results: Sequence[QuestionResult]) -> dict[str, float]:
    n = len(results)
    if not n:
        return {"n": 0}
    return {
        "n": n,
        "hit@1": sum(r.rank == 1 for r in results) / n,
        "hit@3": sum(r.rank is not None and r.rank <= 3 for r in results) / n,
        "mrr@10": sum(1.0 / r.rank for r in results if r.rank is not None) / n,
    }


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summarise(
    results: Sequence[QuestionResult],
) -> tuple[dict[str, float | None], dict[str, dict[str, float]]]:
    answerable = [r for r in results if r.answer is not None]
    unanswerable = [r for r in results if r.answer is None]
    right = [s for r in answerable for _, s, ok in r.hits if ok]
    wrong = [s for r in answerable for _, s, ok in r.hits if not ok]
    metrics: dict[str, float | None] = dict(_rates(answerable))
    metrics.update(
        {
            # a hit's score as a relevance signal across queries (what a threshold sees)
            "hit_auroc": auroc(right, wrong),
            # the top score: answerable above unanswerable
            "abstention_auroc": auroc([r.top_score for r in answerable], [r.top_score for r in unanswerable]),
            "top_score_right_median": _median([r.top_score for r in answerable if r.rank == 1]),
            "top_score_wrong_median": _median([r.top_score for r in answerable if r.rank != 1]),
            "top_score_unanswerable_median": _median([r.top_score for r in unanswerable]),
            "right_hit_score_median": _median(right),
            # the calibrated score claims a probability of relevance: its mean squared error
            "brier": statistics.fmean([(s - ok) ** 2 for r in answerable for _, s, ok in r.hits])
            if any(r.hits for r in answerable)
            else None,
        }
    )
    by_kind = {kind: _rates([r for r in answerable if r.kind == kind]) for kind in ("direct", "turn")}
    return metrics, by_kind


def evaluate_small(
    scenarios: Sequence[SmallScenario],
    settings: Settings,
    embedder: Embedder,
    progress: Progress | None = None,
) -> SmallReport:
    started = time.perf_counter()
    results: list[QuestionResult] = []
    records = 0
    with tempfile.TemporaryDirectory(prefix="memstack-eval-small-") as tmp:
        for i, scenario in enumerate(scenarios):
            found, n = run_scenario(scenario, settings, embedder, Path(tmp) / f"s{i}")
            results += found
            records += n
            if progress:
                progress(1)
    metrics, by_kind = summarise(results)
    return SmallReport(
        scenarios=len(scenarios),
        records=records,
        questions=len(results),
        metrics=metrics,
        by_kind=by_kind,
        seconds=round(time.perf_counter() - started, 2),
        results=results,
    )
