"""``memstack eval extraction``: run change scenarios through the public ingest path and score the end state.

Each scenario gets a fresh embedded store (a temporary data directory) and
its messages are sent one ``add(..., sync=True)`` call at a time, as an agent
sends turns, so every extraction sees what the earlier turns made. The final
LTM (every version) and the top result of each expected search are then
checked (``scenarios.check_state``). The report gives the pass rate overall,
by tag and by file, LTM records written per message and model calls per
message (the extractor's own count of requests to its model, retries
included; 0 for the rule-based extractor).
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memstack.domain.retrieval.types import SearchRequest
from memstack.evaluation.scenarios import TAGS, Check, Scenario, check_state
from memstack.factory import build_embedder, build_extractor, build_service
from memstack.models import MemoryFilters, MemoryRecord, Message, Tier
from memstack.ports.embedder import Embedder
from memstack.ports.llm import DEFAULT_GUIDANCE, ExtractionOp, Extractor, Guidance
from memstack.service import MemoryService
from memstack.settings import Settings

TENANT = "eval"

Progress = Callable[[int], None]


class CountingExtractor:
    """Counts extraction calls and the model requests the wrapped extractor reports."""

    def __init__(self, inner: Extractor) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0

    @property
    def model_calls(self) -> int:
        return int(getattr(self.inner, "model_calls", 0))

    def extract(
        self,
        message: Message,
        context: list[Message],
        neighbours: list[MemoryRecord],
        guidance: Guidance = DEFAULT_GUIDANCE,
    ) -> list[ExtractionOp]:
        self.calls += 1
        return self.inner.extract(message, context, neighbours, guidance)


@dataclass
class ScenarioResult:
    id: str
    tags: list[str]
    source: str
    passed: bool
    messages: int
    ltm_written: int
    model_calls: int
    failed_jobs: int
    checks: list[Check] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["checks"] = [c.as_dict() for c in self.checks]
        return out


@dataclass
class ExtractionReport:
    llm: str
    scenarios: int
    passed: int
    pass_rate: float
    by_tag: dict[str, dict[str, float]]
    by_file: dict[str, dict[str, float]]
    messages: int
    ltm_per_message: float
    llm_calls_per_message: float
    failed_jobs: int
    seconds: float
    results: list[ScenarioResult]

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["results"] = [r.as_dict() for r in self.results]
        return out

    @property
    def failures(self) -> list[ScenarioResult]:
        return [r for r in self.results if not r.passed]


def _all_ltm(service: MemoryService, user: str) -> list[MemoryRecord]:
    filters = MemoryFilters(tier=Tier.LTM, include_superseded=True)
    out: list[MemoryRecord] = []
    cursor: str | None = None
    while True:
        page, cursor = service.store.list(TENANT, user, filters, 200, cursor)
        out.extend(page)
        if not cursor:
            return out


def _failed_jobs(service: MemoryService) -> int:
    dead = getattr(service.queue, "dead_letters", None)
    return len(dead()) if callable(dead) else 0


def run_scenario(
    scenario: Scenario, settings: Settings, embedder: Embedder, extractor: CountingExtractor, data_dir: Path
) -> ScenarioResult:
    service = build_service(
        settings.model_copy(update={"data_dir": data_dir}), embedder=embedder, extractor=extractor
    )
    calls_before = extractor.model_calls
    try:
        for message in scenario.messages:
            service.add(TENANT, scenario.user, [message], sync=True)
        ltm = _all_ltm(service, scenario.user)
        last = max((m.timestamp for m in scenario.messages if m.timestamp), default=None)
        top1: dict[str, str] = {}
        for s in scenario.expect.search:
            request = SearchRequest(
                tenant=TENANT, user_id=scenario.user, query=s.query, top_k=5, reference_time=last
            )
            result = service.search(request)
            top1[s.query] = result.hits[0].record.content if result.hits else ""
        failed = _failed_jobs(service)
    finally:
        service.close()
    checks = check_state(scenario.expect, ltm, top1)
    return ScenarioResult(
        id=scenario.id,
        tags=list(scenario.tags),
        source=scenario.source,
        passed=all(c.passed for c in checks) and not failed,
        messages=len(scenario.messages),
        ltm_written=len(ltm),
        model_calls=extractor.model_calls - calls_before,
        failed_jobs=failed,
        checks=checks,
    )


def _rates(results: Sequence[ScenarioResult], key: Callable[[ScenarioResult], list[str]]) -> dict[str, Any]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        for name in key(r):
            groups[name].append(r.passed)
    known = [t for t in TAGS if t in groups] + sorted(t for t in groups if t not in TAGS)
    rows = {name: (len(groups[name]), sum(groups[name])) for name in known}
    return {name: {"n": n, "passed": ok, "rate": ok / n} for name, (n, ok) in rows.items()}


def evaluate_extraction(
    scenarios: Sequence[Scenario],
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    progress: Progress | None = None,
) -> ExtractionReport:
    started = time.perf_counter()
    model = embedder or build_embedder(settings)  # loaded once for every scenario
    counting = CountingExtractor(extractor or build_extractor(settings, embedder=model))
    results = []
    with tempfile.TemporaryDirectory(prefix="memstack-eval-extraction-") as tmp:
        for i, scenario in enumerate(scenarios):
            results.append(run_scenario(scenario, settings, model, counting, Path(tmp) / f"s{i}"))
            if progress:
                progress(1)
    messages = sum(r.messages for r in results)
    passed = sum(r.passed for r in results)
    return ExtractionReport(
        llm=settings.llm,
        scenarios=len(results),
        passed=passed,
        pass_rate=passed / len(results) if results else 0.0,
        by_tag=_rates(results, lambda r: r.tags),
        by_file=_rates(results, lambda r: [r.source]),
        messages=messages,
        ltm_per_message=sum(r.ltm_written for r in results) / messages if messages else 0.0,
        llm_calls_per_message=sum(r.model_calls for r in results) / messages if messages else 0.0,
        failed_jobs=sum(r.failed_jobs for r in results),
        seconds=round(time.perf_counter() - started, 2),
        results=results,
    )
