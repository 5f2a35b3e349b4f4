"""What the neighbour turns read of records, from the user's index (``ports.store.TurnNeighbours``).

The neighbour stage asks two things of a few records: the turns each head turn's
metadata records around it, and which of those turns the search's filters let it
see. Read from the records, each is a record-cache copy and a generation check
per call (about a tenth of a search at 1,000 memories); the index holds both: each
row's recorded neighbours as JSON text (parsed only for the heads), and the
filters' mask the vector and BM25 stages already worked out for the same view.
"""

from __future__ import annotations

import json

import numpy as np

from memstack.adapters.embedded.user_index import IndexView, Searchable
from memstack.domain.adjacent import ADJACENT, recorded


def recorded_adjacent(view: IndexView, ids: list[str], span: int) -> dict[str, list[str]]:
    """For each of ``ids`` the view holds: the message ids its metadata records within ``span``."""
    out: dict[str, list[str]] = {}
    for memory_id in ids:
        row = view.row_of.get(memory_id)
        if row is None or row >= view.size:
            continue
        text = view.adjacent[row]
        out[memory_id] = recorded({ADJACENT: json.loads(text)}, span) if text is not None else []
    return out


def visible_vectors(
    view: IndexView, ids: list[str], seen: Searchable
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Those of ``ids`` the view holds that ``seen`` allows and that have a full vector, in the order
    given: the view's own id strings (what ``IndexView.holds`` checks), their vectors and rows."""
    _, listed = view.rows(ids)
    rows = np.array(listed, dtype=np.int64)
    at = rows[seen.allowed[rows] & view.has_full[rows]] if len(rows) else rows
    return list(map(view.ids.__getitem__, at.tolist())), view.full[at], at
