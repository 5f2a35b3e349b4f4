"""The per-user ``UserIndex`` objects of one store, checked against the file on every search.

Each search reads one tiny row (the user's ``uid`` and ``generation`` in
``store_users``). The same generation means the cached index is current; a
newer one means "apply the rows written since" (``UserIndex.refresh``); a
different uid means the user was erased and started again, so the index is
read afresh. Another process writing the same file is seen the same way.

One thread brings a user's index up to date while the others wait for it
(a lock per user), so eight concurrent searches after a write read the new
rows once, not eight times. The cache holds at most ``max_rows`` rows in
total, least recently searched users leaving first.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict

from memstack.adapters.embedded.user_index import IndexView, UserIndex, empty_view, user_head

Key = tuple[str, str]


class IndexCache:
    def __init__(self, max_rows: int = 2_000_000) -> None:
        self.max_rows = max_rows
        self._entries: OrderedDict[Key, UserIndex] = OrderedDict()
        self._user_locks: dict[Key, threading.Lock] = {}
        self._lock = threading.Lock()

    def view(self, conn: sqlite3.Connection, tenant: str, user_id: str) -> IndexView:
        """The user's rows as of now (an empty view for a user with no memories)."""
        head = user_head(conn, tenant, user_id)
        if head is None:
            return empty_view()
        uid, generation = head
        key = (tenant, user_id)
        fresh = self._fresh(key, uid, generation)
        if fresh is not None:
            return fresh
        with self._user_lock(key):
            fresh = self._fresh(key, uid, generation)  # another thread may have just done it
            if fresh is not None:
                return fresh
            with self._lock:
                entry = self._entries.get(key)
            if entry is None or entry.uid != uid or not entry.refresh(conn, tenant, user_id):
                entry = UserIndex.load(conn, tenant, user_id)
                if entry is None:  # erased since the generation was read
                    self.drop(tenant, user_id)
                    return empty_view()
            self._keep(key, entry)
            return entry.view()

    def drop(self, tenant: str, user_id: str) -> None:
        with self._lock:
            self._entries.pop((tenant, user_id), None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _fresh(self, key: Key, uid: int, generation: int) -> IndexView | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.uid != uid or entry.generation < generation:
                return None
            self._entries.move_to_end(key)
            return entry.view()

    def _user_lock(self, key: Key) -> threading.Lock:
        with self._lock:
            lock = self._user_locks.get(key)
            if lock is None:
                lock = self._user_locks[key] = threading.Lock()
            return lock

    def _keep(self, key: Key, entry: UserIndex) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            total = sum(e.size for e in self._entries.values())
            while total > self.max_rows and len(self._entries) > 1:
                old_key, old = self._entries.popitem(last=False)
                self._user_locks.pop(old_key, None)
                total -= old.size
