"""Why an evidence turn misses the first k turns a search cites (``scripts/recall_misses.py``).

For each missed evidence turn the script records where the turn was in every
stage (``first_places`` over each stage's ranking) and this module decides the
**cause**, the first that applies:

* ``not_retrieved``: no record citing the turn is among the vector stage's or
  the BM25 stage's candidates (their configured depth), nor among the
  neighbour turns: no ordering of the candidates could have found it;
* ``fusion_cut``: retrieved, but no record citing it is in the fused pool
  (stage 4's ``RETRIEVAL_POOL`` best by their own fusion);
* ``outranked``: pooled, but the first k turns the results cite are others.

and, per question with a miss, **what took the first k turns instead**
(``fill``): per kind of hit (a raw turn, a later chunk of a long turn, an
extracted memory, a consolidation summary or synthesis, a profile), how many
results and how many new turns each kind brought, the results that brought no
new turn (copies of evidence already cited), and the places results citing
several turns took beyond their first.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from memstack.models import PROFILE, MemoryRecord, Tier

CAUSES = ("not_retrieved", "fusion_cut", "outranked")
KINDS = ("turn", "chunk", "memory", "rollup", "profile")
#: a turn no ranking holds: deeper than any real place
NOWHERE = 10**9


def hit_kind(record: MemoryRecord) -> str:
    """What a result is: ``turn``, ``chunk`` (a long turn's later chunk), ``memory``, ``rollup`` or
    ``profile``."""
    if record.tier == Tier.STM:
        return "chunk" if int(record.metadata.get("chunk", 0) or 0) > 0 else "turn"
    consolidation = record.metadata.get("consolidation")
    if consolidation == PROFILE:
        return "profile"
    return "rollup" if consolidation else "memory"


def first_places(
    ids: Iterable[str], records: Mapping[str, MemoryRecord]
) -> tuple[dict[str, int], dict[str, int]]:
    """Per cited turn (message id): the 1-based place in ``ids`` of its own raw-turn record (or chunk),
    and of the first memory citing it."""
    own: dict[str, int] = {}
    memory: dict[str, int] = {}
    for place, record_id in enumerate(ids, start=1):
        record = records.get(record_id)
        if record is None:
            continue
        target = own if record.tier == Tier.STM else memory
        for source in record.source_ids:
            target.setdefault(source, place)
    return own, memory


@dataclass
class Fill:
    """What the results that brought a question's first k distinct turns were."""

    slots: Counter[str] = field(default_factory=Counter)
    turns: Counter[str] = field(default_factory=Counter)
    no_new: Counter[str] = field(default_factory=Counter)
    #: places taken by the second and further turns of results citing several
    extra_places: int = 0
    #: the most results citing one turn
    most_per_turn: int = 0


def fill(hits: Sequence[MemoryRecord], k: int) -> Fill:
    out = Fill()
    seen: set[str] = set()
    per_turn: Counter[str] = Counter()
    for record in hits:
        if len(seen) >= k:
            break
        kind = hit_kind(record)
        new = [s for s in dict.fromkeys(record.source_ids) if s not in seen][: k - len(seen)]
        out.slots[kind] += 1
        out.turns[kind] += len(new)
        if not new:
            out.no_new[kind] += 1
        out.extra_places += max(0, len(new) - 1)
        per_turn.update(dict.fromkeys(record.source_ids, 1))
        seen.update(new)
    out.most_per_turn = max(per_turn.values(), default=0)
    return out


def cause(
    best_vector: int, best_bm25: int, neighbour: bool, pooled: bool, vector_depth: int, bm25_depth: int
) -> str:
    """The first cause that applies (module docstring); ``best_*``: the best place of any record citing
    the turn in that stage's ranking (``NOWHERE`` when none)."""
    if pooled:
        return "outranked"
    if best_vector <= vector_depth or best_bm25 <= bm25_depth or neighbour:
        return "fusion_cut"
    return "not_retrieved"


@dataclass(frozen=True)
class Miss:
    """One evidence turn not among a question's first k turns, and where it was in every stage."""

    category: str
    turn: str
    role: str | None
    chars: int
    cause: str
    #: 1-based places (None: not there): its own record and its best memory, per stage
    vector_own: int | None = None
    vector_memory: int | None = None
    bm25_own: int | None = None
    bm25_memory: int | None = None
    neighbour: int | None = None
    pool_own: int | None = None
    pool_memory: int | None = None
    #: its place among the distinct turns the results cite (None: not among the first 2k)
    turn_rank: int | None = None

    @property
    def best_stage_place(self) -> int:
        places = (self.vector_own, self.vector_memory, self.bm25_own, self.bm25_memory)
        return min((p for p in places if p), default=NOWHERE)

    @property
    def pool_place(self) -> int | None:
        return min((p for p in (self.pool_own, self.pool_memory) if p), default=None)


def _median(values: Iterable[int | None]) -> str:
    found = [v for v in values if v]
    return f"{statistics.median(found):.0f}" if found else "-"


def _bucket(place: int, edges: Sequence[int]) -> str:
    low = 1
    for edge in edges:
        if place <= edge:
            return f"{low}-{edge}"
        low = edge + 1
    return f">{edges[-1]}" if place < NOWHERE else "never"


def cause_table(misses: Sequence[Miss], evidence: Mapping[str, int], depth: int) -> list[str]:
    """Markdown rows: per category (and all), evidence turns, misses by cause, and where they were."""
    by_category: dict[str, list[Miss]] = defaultdict(list)
    for m in misses:
        by_category[m.category].append(m)
    lines = [
        "| category | evidence turns | missed | not retrieved | fusion cut | outranked | assistant turns "
        "| median place vector (own / memory) | median place BM25 (own / memory) "
        f"| in neither stage's first {depth} |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for category in [*sorted(by_category), "all"]:
        rows = misses if category == "all" else by_category[category]
        causes = Counter(m.cause for m in rows)
        total = sum(evidence.values()) if category == "all" else evidence.get(category, 0)
        lines.append(
            f"| {category} | {total} | {len(rows)} | "
            + " | ".join(str(causes.get(c, 0)) for c in CAUSES)
            + f" | {sum(1 for m in rows if m.role == 'assistant')}"
            + f" | {_median(m.vector_own for m in rows)} / {_median(m.vector_memory for m in rows)}"
            + f" | {_median(m.bm25_own for m in rows)} / {_median(m.bm25_memory for m in rows)}"
            + f" | {sum(1 for m in rows if m.best_stage_place == NOWHERE)} |"
        )
    return lines


def depth_lines(misses: Sequence[Miss], k: int) -> list[str]:
    """Where the outranked ones sat in the pool, and how deep the others were in the stages."""
    lines = []
    pooled = [p for m in misses if (p := m.pool_place) is not None]
    if pooled:
        buckets = Counter(_bucket(p, (k, 2 * k, 50, 100)) for p in pooled)
        lines.append(
            f"outranked: place in the fused pool (records, stage 4's order) {dict(sorted(buckets.items()))}"
        )
    others = [m.best_stage_place for m in misses if m.pool_place is None]
    if others:
        buckets = Counter(_bucket(p, (100, 400, 1000)) for p in others)
        lines.append(f"not pooled: best place in the vector or BM25 stage {dict(sorted(buckets.items()))}")
    return lines


def fill_table(fills: Sequence[Fill], k: int) -> list[str]:
    """Markdown rows: per hit kind, per question with a miss, the results and turns that filled its
    first k."""
    slots: Counter[str] = Counter()
    turns: Counter[str] = Counter()
    no_new: Counter[str] = Counter()
    for f in fills:
        slots.update(f.slots)
        turns.update(f.turns)
        no_new.update(f.no_new)
    n = len(fills) or 1
    lines = [
        f"what filled the first {k} turns of the {len(fills)} questions with a miss (mean per question):",
        "| hit kind | results | turns they brought | results bringing no new turn |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {kind} | {slots[kind] / n:.2f} | {turns[kind] / n:.2f} | {no_new[kind] / n:.2f} |"
        for kind in KINDS
        if slots.get(kind)
    ]
    extra = sum(f.extra_places for f in fills) / n
    lines.append(
        f"places taken by further turns of results citing several: {extra:.2f} per question; "
        f"most results citing one turn: median {_median(f.most_per_turn for f in fills)}"
    )
    return lines


#: the places ``Density`` groups results by (1-based, inclusive upper ends)
PLACES = (10, 25, 50)


@dataclass
class Density:
    """Per (places, kind of hit): results, and results that brought a new evidence turn.

    Over every question, not only those with a miss: how much evidence each kind of
    result brings at each depth, so a re-ordering by kind can be judged before it is
    built (a kind whose rate below place 25 is no higher than the rate above it cannot
    lift recall@25 by moving up).
    """

    results: Counter[tuple[str, str]] = field(default_factory=Counter)
    evidence: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, hits: Sequence[MemoryRecord], lexical: Sequence[bool], evidence: set[str]) -> None:
        """``lexical``: per hit, whether the BM25 stage ranked it (a raw turn's kind is split by it)."""
        seen: set[str] = set()
        for place, (record, in_bm25) in enumerate(zip(hits, lexical, strict=True), start=1):
            band = _bucket(place, PLACES)
            if band.startswith(">"):
                return
            kind = hit_kind(record)
            if kind == "turn":
                kind = "turn, BM25" if in_bm25 else "turn, no BM25"
            new = [s for s in record.source_ids if s not in seen]
            seen.update(new)
            self.results[(band, kind)] += 1
            self.evidence[(band, kind)] += any(s in evidence for s in new)

    def table(self) -> list[str]:
        lines = [
            "| places | hit kind | results | bringing new evidence | rate |",
            "|---|---|---|---|---|",
        ]
        for band, kind in sorted(self.results):
            n, found = self.results[(band, kind)], self.evidence[(band, kind)]
            lines.append(f"| {band} | {kind} | {n} | {found} | {found / n:.3f} |")
        return lines
