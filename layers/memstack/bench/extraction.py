"""``memstack bench extraction``: turns per second of ingest with extraction, against the embedder's floor.

The turns are added one session per call with ``sync`` (the call returns after
every turn is extracted into LTM), as ``memstack ingest --sync`` and the
evaluation harness add them, on a fresh embedded store with the offline
extractor. What a process loads once is loaded before anything is timed (the
model; the extractor's word lists and patterns, by ingesting one turn into a
throwaway store: ``warmup_seconds``), so the figure is the rate of a running
server or worker. Beside it, measured in the same run on the same turns:

- the **floor**: the model alone embedding each turn's text once, in
  batches: what ingest would reach if embedding the turns were its only work.
  It is measured right before and right after each ingest (their mean), so
  the ratio ``of_floor`` compares the two at the same load;
- how many texts the model embedded per turn, and the share of the ingest's
  time spent in the model (a counting wrapper directly around the model,
  below any memo);
- the process's CPU seconds for the ingest and for the floor, as turns per CPU
  second: what one otherwise idle core would reach. On a shared machine the
  wall-clock figures move with the load; these move far less, so a change to
  the code shows in them even when the machine is busy;
- optionally (``memo=False``) the same ingest without the embedding memo, so a
  reader sees in one run what the memo and batching are worth.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from memstack.bench.corpus import Corpus
from memstack.bench.stats import machine
from memstack.domain.embedding_memo import memoised
from memstack.domain.indexing import turn_text
from memstack.factory import build_embedder, build_service
from memstack.models import MemoryFilters, Message, Tier
from memstack.ports.embedder import Embedder
from memstack.service import MemoryService
from memstack.settings import load_settings

TENANT = "bench"
USER = "bench-user"
#: synthetic turns per session (one ``add`` each), about a LoCoMo session's length
SESSION_TURNS = 20


class _Counting:
    """The model, counting the texts it embeds and the seconds it takes (thread-safe)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.dim, self.name = inner, inner.dim, inner.name
        self.texts = 0
        self.calls = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        started = time.perf_counter()
        out = self.inner.embed(texts)
        with self._lock:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)
            self.calls += int(bool(texts))
        return out


@dataclass
class IngestRun:
    memo: bool
    turns: int
    seconds: float
    turns_per_s: float
    #: texts the model embedded, per turn, and in how many calls
    texts_per_turn: float
    embed_calls: int
    #: share of the ingest's wall time spent inside the model
    embed_share: float
    ltm_memories: int
    #: the process's CPU seconds for the ingest (every thread), and turns per CPU second
    cpu_seconds: float = 0.0
    turns_per_cpu_s: float = 0.0
    #: the floor around this run (mean of before and after) and turns/s as a share of it
    floor_turns_per_s: float = 0.0
    of_floor: float = 0.0
    floor_turns_per_cpu_s: float = 0.0


@dataclass
class ExtractionReport:
    source: str
    embedder: str
    turns: int
    sessions: int
    #: the floor: the model embedding each turn's text once, in batches of ``floor_batch``
    #: (the median of every floor measurement of the run)
    floor_seconds: float
    floor_turns_per_s: float
    runs: list[IngestRun]
    #: the one-off loads done before timing: the model, then one turn ingested (word lists, patterns)
    warmup_seconds: float = 0.0
    config: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=machine)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def synthetic_sessions(turns: int, per_session: int = SESSION_TURNS) -> list[list[Message]]:
    """The deterministic synthetic conversation (``bench/corpus.py``), cut into sessions."""
    messages = list(Corpus().messages(turns, prefix="t"))
    return [messages[i : i + per_session] for i in range(0, len(messages), per_session)]


def locomo_sessions(path: Path | str, turns: int) -> list[list[Message]]:
    """The first ``turns`` turns of a LoCoMo file, session by session, as the evaluation ingests them."""
    from memstack.evaluation.locomo import load_locomo
    from memstack.evaluation.runner import messages_of

    out: list[list[Message]] = []
    left = turns
    for conv in load_locomo(path):
        for session in sorted(conv.sessions):
            msgs = messages_of(conv, session)[:left]
            # Ids unique across conversations: every conversation goes to the one bench user.
            msgs = [m.model_copy(update={"id": f"{conv.sample_id}-{m.id}"}) for m in msgs]
            if msgs:
                out.append(msgs)
                left -= len(msgs)
            if left <= 0:
                return out
    return out


def _count_ltm(service: MemoryService) -> int:
    total, cursor = 0, None
    while True:
        records, cursor = service.store.list(TENANT, USER, MemoryFilters(tier=Tier.LTM), 500, cursor)
        total += len(records)
        if not cursor:
            return total


#: the turn ingested into a throwaway store before timing, so one-off loads are not timed
WARM_UP = Message(
    id="warm-up", speaker="Maya", content="I moved to Osaka last year and I really love the food there."
)


def _warm_up(model: Embedder, embedder: str) -> None:
    with tempfile.TemporaryDirectory(prefix="memstack-bench-extract-") as tmp:
        service = build_service(load_settings(data_dir=Path(tmp), embedder=embedder), embedder=model)
        try:
            service.add(TENANT, USER, [WARM_UP], session_id="warm-up", infer=True, sync=True)
        finally:
            service.close()


def _ingest(sessions: list[list[Message]], model: Embedder, embedder: str, memo: bool) -> IngestRun:
    counting = _Counting(model)
    with tempfile.TemporaryDirectory(prefix="memstack-bench-extract-") as tmp:
        settings = load_settings(data_dir=Path(tmp), embedder=embedder, embedding_memo=4096 if memo else 0)
        service = build_service(settings, embedder=memoised(counting, settings.embedding.embedding_memo))
        try:
            started, cpu_started = time.perf_counter(), time.process_time()
            for n, msgs in enumerate(sessions):
                service.add(TENANT, USER, msgs, session_id=f"session-{n}", infer=True, sync=True)
            seconds = time.perf_counter() - started
            cpu_seconds = time.process_time() - cpu_started
            ltm = _count_ltm(service)
        finally:
            service.close()
    turns = sum(len(s) for s in sessions)
    return IngestRun(
        memo=memo,
        turns=turns,
        seconds=round(seconds, 3),
        turns_per_s=round(turns / seconds, 2),
        texts_per_turn=round(counting.texts / turns, 2),
        embed_calls=counting.calls,
        embed_share=round(counting.seconds / seconds, 3),
        ltm_memories=ltm,
        cpu_seconds=round(cpu_seconds, 3),
        turns_per_cpu_s=round(turns / max(cpu_seconds, 1e-9), 2),
    )


def run_extraction_bench(
    sessions: Sequence[list[Message]],
    *,
    source: str,
    embedder: str = "minilm",
    compare: bool = False,
    floor_batch: int = 64,
    progress: Callable[[str], None] = lambda _: None,
) -> ExtractionReport:
    sessions = [list(s) for s in sessions if s]
    turns = sum(len(s) for s in sessions)
    if not turns:
        raise ValueError("no turns to ingest")
    started = time.perf_counter()
    model = build_embedder(load_settings(embedder=embedder))
    _warm_up(model, embedder)
    warmup_seconds = time.perf_counter() - started
    texts = [turn_text(m) for s in sessions for m in s]

    def floor() -> tuple[float, float]:
        """Wall and CPU seconds of the model embedding every turn text once."""
        progress(f"floor: embedding {turns:,} turn texts in batches of {floor_batch}")
        started, cpu_started = time.perf_counter(), time.process_time()
        for i in range(0, len(texts), floor_batch):
            model.embed(texts[i : i + floor_batch])
        return time.perf_counter() - started, time.process_time() - cpu_started

    runs, floors = [], []
    for memo in (True, False) if compare else (True,):
        state = "on" if memo else "off"
        before = floor()
        progress(f"ingest with extraction, {turns:,} turns in {len(sessions)} sessions, memo {state}")
        run = _ingest(sessions, model, embedder, memo)
        after = floor()
        floors += [before[0], after[0]]
        run.floor_turns_per_s = round(turns / ((before[0] + after[0]) / 2), 2)
        run.of_floor = round(run.turns_per_s / run.floor_turns_per_s, 3)
        run.floor_turns_per_cpu_s = round(turns / max((before[1] + after[1]) / 2, 1e-9), 2)
        runs.append(run)
    floor_seconds = statistics.median(floors)
    return ExtractionReport(
        source=source,
        embedder=embedder,
        turns=turns,
        sessions=len(sessions),
        floor_seconds=round(floor_seconds, 3),
        floor_turns_per_s=round(turns / floor_seconds, 2),
        runs=runs,
        warmup_seconds=round(warmup_seconds, 3),
        config={"floor_batch": floor_batch, "compare": compare},
    )
