"""Extraction compares a turn with specific memories only, never with what consolidation wrote.

Consolidation's summaries, syntheses and profiles (``metadata.consolidation``)
restate many memories at once; the extractor may not edit them
(``rules.targets.editable``), yet among a turn's neighbours they take the
places of the specific memories it could update or leave unchanged, so it adds
near-copies instead, and the duplicate check misses a copy behind them. A user
consolidated between sessions then got different memories from the same turns
than one never consolidated (BEAM's first 5 conversations: 5,471 extracted
records against 5,440; issue 21 item 8). So each ranking is read as if
consolidation had written nothing: its records are dropped and the ranking
fetched deeper until ``k`` specific ones remain (or the user has no more). A
user never consolidated pays one read of the ids ranked, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from memstack.models import MemoryRecord, ScoredId

#: how much deeper each further fetch reads, and at most how many times
_DEEPER = 3
_FETCHES = 4


def consolidated(record: MemoryRecord) -> bool:
    """Written by consolidation (a summary, a synthesis, a profile), not by extraction."""
    return bool(record.metadata.get("consolidation"))


def specific_rankings(
    fetch: Callable[[int], Mapping[str, Sequence[ScoredId]]],
    read: Callable[[list[str]], dict[str, MemoryRecord]],
    k: int,
) -> tuple[dict[str, list[ScoredId]], dict[str, MemoryRecord]]:
    """Each ranking ``fetch(depth)`` returns, without consolidation's records, cut to ``k``; and the
    records read (by id) of every id ranked."""
    depth, deepest = k, k * _DEEPER ** (_FETCHES - 1)
    while True:
        rankings = fetch(depth)
        ids = list(dict.fromkeys(h.id for ranking in rankings.values() for h in ranking))
        records = read(ids) if ids else {}
        dropped = {i for i in ids if i in records and consolidated(records[i])}
        kept = {name: [h for h in ranking if h.id not in dropped] for name, ranking in rankings.items()}
        # Done when nothing was dropped, every ranking still has k, or a ranking ran out of records.
        short = any(len(kept[name]) < k and len(ranking) >= depth for name, ranking in rankings.items())
        if not dropped or not short or depth >= deepest:
            return {name: ranking[:k] for name, ranking in kept.items()}, records
        depth *= _DEEPER
