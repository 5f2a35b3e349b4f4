"""The records of one user that searches returned, kept while no write changes them.

A search materialises only the few records it returns, but each costs a SQL
read, a JSON parse of three columns and a pydantic validation (~25 µs), about a
sixth of a search at 1,000 memories. A warm process answering one user again and
again returns many of the same records, so they are kept beside the user's
index (``user_index.UserIndex``), under the same write sequence:

- a record enters only when read in one transaction with the user's generation,
  and only if that is the generation the cache is at (a write in between, or
  an index not yet refreshed to it, leaves it out);
- a record is served only when the user is at exactly that generation now;
- bringing the index to a newer generation drops every row written since
  (``row_gen``: every write of a row moves it), so what is kept is always the
  row as it is at the cache's generation.

Erase removes the user's ``store_users`` row (its uid is never reused) and
drops the index with this cache: nothing erased is served from it again.
Callers get copies, so changing a returned record changes nothing kept.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from typing import Any

from memstack.models import MemoryRecord

#: records kept per user (about 2 KB each); past it the cache starts over
RECORDS_KEPT = 4096
#: a user with at most this many live rows has every record read into the cache with the index
#: (``UserIndex.load``): ~10 us a record once, where each search's first read of a hit costs a
#: SQL statement and ~10 us a record (~0.1 ms of a 1 ms search at 1,000 memories). Half the
#: cache, so the records later writes add are kept beside them before it starts over.
WARM_BELOW = RECORDS_KEPT // 2


class RecordCache:
    def __init__(self, uid: int, generation: int, limit: int = RECORDS_KEPT) -> None:
        self.uid = uid
        self.generation = generation
        self.limit = limit
        self._records: dict[str, MemoryRecord] = {}
        self._lock = threading.Lock()

    def get(self, generation: int, ids: Iterable[str]) -> dict[str, MemoryRecord]:
        """Copies of the records of ``ids`` held, when the user is at this cache's ``generation``."""
        with self._lock:
            if generation != self.generation:
                return {}
            held = [(i, r) for i in ids if (r := self._records.get(i)) is not None]
        return {i: _copy(r) for i, r in held}

    def put(self, uid: int, generation: int, records: Iterable[MemoryRecord]) -> None:
        """Keep records read at ``generation`` (of user ``uid``): only if that is this cache's."""
        with self._lock:
            if uid != self.uid or generation != self.generation:
                return
            for record in records:
                if len(self._records) >= self.limit:
                    self._records.clear()
                self._records[record.id] = _copy(record)

    def advance(self, generation: int, changed: Iterable[str]) -> None:
        """The user's index is now at ``generation``: drop the rows written since the last one."""
        with self._lock:
            for memory_id in changed:
                self._records.pop(memory_id, None)
            self.generation = generation

    def __len__(self) -> int:
        return len(self._records)


def _copy(record: MemoryRecord) -> MemoryRecord:
    """A copy with fresh containers: a caller's change to a returned record stays its own.

    What pydantic's ``__copy__`` does, without its generic steps (half the time: a
    search copies each record it returns from the cache).
    """
    values = dict(record.__dict__)
    values["source_ids"] = list(record.source_ids)
    values["conflicts_with"] = list(record.conflicts_with)
    values["metadata"] = {k: v if type(v) in _LEAVES else _json_copy(v) for k, v in record.metadata.items()}
    out = MemoryRecord.__new__(MemoryRecord)
    object.__setattr__(out, "__dict__", values)
    object.__setattr__(out, "__pydantic_fields_set__", set(record.__pydantic_fields_set__))
    object.__setattr__(out, "__pydantic_extra__", None)
    object.__setattr__(out, "__pydantic_private__", None)
    return out


#: immutable JSON leaves: shared by a copy
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _json_copy(value: Any) -> Any:
    """A deep copy of a metadata value: dicts and lists made afresh, immutable leaves shared, anything
    else through ``copy.deepcopy``. Metadata is parsed JSON, so this is a deep copy; ``deepcopy``
    alone spends its memo and dispatch on every element (~4x as long for the list of neighbour ids
    each turn's metadata holds, and a search copies every record it returns)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _LEAVES else _json_copy(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _LEAVES else _json_copy(v) for v in value]
    return value if kind in _LEAVES else copy.deepcopy(value)
