"""A fixed corpus and a fixed set of searches whose answers are recorded in a golden file.

The corpus mixes what the retrieval stages treat differently: raw turns of the
synthetic benchmark conversation, the extraction scenarios of
``examples/extraction/dev.jsonl`` ingested with the offline extractor (LTM
memories, updated and deleted versions, superseded turns, turns marked
consolidated), CONTEXT memories of one session, and two identical turns. (Consolidation is
left out: its summaries differ from run to run.)
The searches cover every stage's switch: explain, history, filters,
``min_score``, time phrases, feedback, category affinity, hidden consolidated
turns, a reranker.

``tests/retrieval/test_ranking_golden.py`` checks the pipeline against the file.
It records what a refactoring must keep and nothing more: each search's result
order (a record by tier, version and provenance) and its top scores. Explain
values, status lines and the quality of the answers are guarded elsewhere
(``tests/retrieval/test_stage_list.py``, the quality floors in
``tests/evaluation/test_quality_floors.py``), so adding an explain value or a
stage that changes no order leaves the file alone. When a change is *meant* to
change rankings, regenerate it and say so in the commit: the diff is one line per
search: ``python -m tests.retrieval.ranking_corpus``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstack.bench.corpus import Corpus
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest, SearchResult
from memstack.factory import build_service
from memstack.models import Kind, MemoryFilters, Message, Scope, Tier
from memstack.ports.store import MemoryStore
from memstack.service import MemoryService
from memstack.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "ranking_golden.jsonl"
SCENARIOS = ROOT / "examples" / "extraction" / "dev.jsonl"
TENANT, USER = "golden", "gina"
REFERENCE = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
RAW_TURNS = 400
SCENARIO_COUNT = 60


class LengthReranker:
    """A deterministic stand-in for a cross-encoder: longer passages first."""

    name = "length"

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        return [float(len(p) % 97) for p in passages]


def build(data_dir: Path) -> MemoryService:
    """The corpus in a fresh embedded store under ``data_dir`` (hashing embedder, offline extractor)."""
    service = build_service(load_settings(data_dir=data_dir, embedder="hashing"))
    corpus = Corpus()
    turns = list(corpus.messages(RAW_TURNS, prefix="raw-"))
    for start in range(0, len(turns), 100):
        service.add(TENANT, USER, turns[start : start + 100], session_id=f"raw-{start // 200}", infer=False)
    lines = SCENARIOS.read_text().splitlines()[:SCENARIO_COUNT]
    for line in lines:
        scenario = json.loads(line)
        for i, m in enumerate(scenario["messages"]):
            message = Message.model_validate({**m, "id": f"{scenario['id']}-{i}"})
            service.add(TENANT, USER, [message], session_id=f"s-{scenario['id']}", sync=True)
    context = [
        Message(id=f"ctx-{i}", speaker="Gina", content=text, timestamp=datetime(2024, 5, 20 + i, tzinfo=UTC))
        for i, text in enumerate(
            ["For this trip I booked the hotel near the harbour.", "This trip I want to try the ferry."]
        )
    ]
    service.add(TENANT, USER, context, session_id="trip", scope=Scope.CONTEXT, infer=False)
    # Near-duplicates: the same words twice, so stage 6 has something to remove.
    twins = [
        Message(
            id=f"twin-{i}",
            speaker="Gina",
            content="My lucky number is seventeen and my colour is teal.",
            timestamp=datetime(2024, 5, 25, tzinfo=UTC),
        )
        for i in range(2)
    ]
    service.add(TENANT, USER, twins, session_id="twins", infer=False)
    return service


def queries() -> list[str]:
    out = Corpus().queries(10)
    scenarios = [json.loads(line) for line in SCENARIOS.read_text().splitlines()[:SCENARIO_COUNT]]
    for scenario in scenarios[::3]:
        out += [check["query"] for check in scenario.get("expect", {}).get("search", [])]
    # What an updated fact's first turn said: that turn is superseded, and ranks first before stage 8.
    out += [s["messages"][0]["content"] for s in scenarios if "update" in s["tags"]][:6]
    out += [
        "what did I do last month",
        "what happened in January 2024",
        "where did Kim live before",
        "what was my job before",
        "hotel for this trip",
        "lucky number and colour",
        "zzyzx quorble",
    ]
    return out


#: how many of each search's first scores are recorded (the order is recorded in full)
SCORES = 3


def _cases() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, SearchRequest fields, RetrievalConfig changes) per configuration."""
    return [
        ("default", {}, {}),
        ("explain", {"explain": True, "top_k": 5}, {}),
        ("history", {"include_history": True, "top_k": 5}, {}),
        ("ltm-facts", {"filters": MemoryFilters(tier=Tier.LTM, kind=Kind.FACT)}, {}),
        ("session", {"filters": MemoryFilters(session_id="trip"), "top_k": 5}, {}),
        ("min-score", {"min_score": 0.2, "top_k": 20}, {}),
        ("feedback", {"top_k": 5}, {"prf_terms": 10}),
        ("hide-consolidated", {"top_k": 5}, {"consolidated_stm_weight": 0.0}),
        ("no-source-dedup", {"top_k": 5}, {"dedup_by_source": False, "superseded_turns_last": False}),
        ("rerank", {"top_k": 5}, {"rerank_candidates": 20}),
    ]


def _key(hit: Any) -> str:
    """A result by what it is, not by its wording: tier, version, the messages it came from."""
    r = hit.record
    return f"{r.tier}|v{r.version}|{','.join(r.source_ids)}" + ("|superseded" if hit.superseded else "")


def _answer(result: SearchResult) -> dict[str, Any]:
    return {
        "hits": [_key(h) for h in result.hits],
        "scores": [float(f"{h.score:.10g}") for h in result.hits[:SCORES]],
    }


def run(service: MemoryService, store: MemoryStore | None = None) -> dict[str, Any]:
    """Every case's answer to every query, as plain JSON (``store``: read through it instead)."""
    base: RetrievalConfig = service.retriever.config
    store = store or service.store
    out: dict[str, Any] = {}
    for name, fields, changes in _cases():
        config = base.model_copy(update=changes)
        reranker = LengthReranker() if "rerank_candidates" in changes else None
        retriever = Retriever(store, service.embedder, config, reranker)
        out[name] = {
            q: _answer(
                retriever.search(
                    SearchRequest(tenant=TENANT, user_id=USER, query=q, reference_time=REFERENCE, **fields)
                )
            )
            for q in queries()
        }
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        service = build(Path(tmp))
        try:
            answers = run(service)
        finally:
            service.close()
    # One line per search, so a changed ranking shows as a readable diff.
    lines = [
        json.dumps([case, query, answer], sort_keys=True, separators=(",", ":"))
        for case, by_query in answers.items()
        for query, answer in by_query.items()
    ]
    GOLDEN.write_text("\n".join(lines) + "\n")
    print(f"wrote {GOLDEN} ({sum(len(v) for v in answers.values())} searches)", file=sys.stderr)


if __name__ == "__main__":
    main()
