"""``MemstackStore``: memstack as LangGraph's long-term memory (``langgraph.store.base.BaseStore``).

Namespaces map onto memstack's own axes::

    (*prefix, user_id)              the user's memories (scope USER)
    (*prefix, user_id, session_id)  memories seen only in that session (scope CONTEXT)

``put`` writes a keyed memory (``PUT /v1/memories/keys/{key}``): its text
field (``content``, ``text``, ``memory`` or ``data``, else the whole value as
JSON) is what memstack embeds and indexes, the rest of the value rides in its
metadata; writing the key again makes a new version, ``delete`` writes a
tombstone. ``search`` runs memstack's retrieval pipeline (BM25 + vectors,
temporal boost) and also finds the memories memstack extracted from the
user's conversations: those come back with their memory id as the key and
``{"content", "kind", "category"}`` as the value. Filters use LangGraph's own
matching (``$eq``, ``$ne``, ``$gt`` ...); an equality on a string field is
also sent to memstack as a metadata filter (each string field of a value is
kept as metadata ``lg.<field>`` too), so a search with a query ranks only the
items that can match and finds them however many others rank above them.
memstack memories do not expire, so TTLs are not supported (``supports_ttl = False``).

Backed by a ``MemoryClient`` (any memstack API), or by a service in this
process: ``MemstackStore.in_process(service, settings, tenant)``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

# LangGraph's own namespace and filter matching, so this store answers exactly as its stores do.
from langgraph.store.memory import _compare_values, _does_match

from memstack.api.schemas import Memory
from memstack.client import calls
from memstack.client.errors import MemoryApiError
from memstack.client.sync import MemoryClient
from memstack.models import Scope, Tier

TEXT_FIELDS = ("content", "text", "memory", "data")
MAX_SEARCH = 100  # the API's default MEMSTACK_MAX_TOP_K
# Metadata of a memory written through the store.
KEY, VALUE, TEXT, CREATED = "lg_key", "lg_value", "lg_text", "lg_created"
#: a value's string fields, as metadata keys memstack can filter on (``lg.<field>``)
FIELD_PREFIX = "lg."
_FILTERABLE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,61}$")
#: the API's limit on metadata keys, less the four above
MAX_FILTERABLE = 46
# The fields of extracted memories' values are record fields, not metadata: never sent as filters.
_NOT_METADATA = frozenset((*TEXT_FIELDS, "kind", "category"))


def _filterable(name: str, value: Any) -> bool:
    """A field memstack can hold as a metadata string and match exactly as LangGraph does."""
    return (
        isinstance(value, str)
        and name not in _NOT_METADATA
        and _FILTERABLE_NAME.match(name) is not None
        and not any(ord(c) < 32 or ord(c) == 127 for c in value)
    )


def filterable_fields(rest: Mapping[str, Any]) -> dict[str, str]:
    """The metadata ``lg.<field>`` of a value's string fields (all of them, or the put is refused)."""
    fields = {FIELD_PREFIX + k: v for k, v in rest.items() if _filterable(k, v)}
    if len(fields) > MAX_FILTERABLE:
        raise ValueError(f"memstack keeps at most {MAX_FILTERABLE} string fields of a value besides its text")
    return fields


def pushed_filter(filter: Mapping[str, Any] | None) -> dict[str, str]:
    """The equalities of a LangGraph filter memstack can apply itself (string fields)."""
    pushed = {}
    for name, wanted in (filter or {}).items():
        if isinstance(wanted, dict) and set(wanted) == {"$eq"}:
            wanted = wanted["$eq"]
        if _filterable(name, wanted):
            pushed[FIELD_PREFIX + name] = wanted
    return pushed


def split_value(value: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(text memstack indexes, the field it came from or "", the rest of the value)."""
    for name in TEXT_FIELDS:
        text = value.get(name)
        if isinstance(text, str) and text.strip():
            return text, name, {k: v for k, v in value.items() if k != name}
    return json.dumps(value, ensure_ascii=False, sort_keys=True), "", {}


class MemstackStore(BaseStore):
    supports_ttl = False

    def __init__(self, client: MemoryClient, *, prefix: tuple[str, ...] = ()) -> None:
        self.client = client
        self.prefix = tuple(prefix)
        self._users: set[str] = set()  # users this store has seen (list_namespaces without a user)

    @classmethod
    def in_process(cls, service: Any, settings: Any, tenant: str, **kwargs: Any) -> MemstackStore:
        """A store over a ``MemoryService`` in this process (its REST API, without a socket)."""
        from memstack.client.in_process import in_process_client, wsgi_api

        return cls(in_process_client(wsgi_api(service, settings, tenant)), **kwargs)

    # ------------------------------------------------------------ namespaces
    def _where(self, namespace: tuple[str, ...], *, exact: bool) -> tuple[str, str | None]:
        """(user_id, session_id) of a namespace; ``exact``: it must name an item's namespace."""
        n = len(self.prefix)
        if tuple(namespace[:n]) != self.prefix or len(namespace) <= n or (exact and len(namespace) > n + 2):
            shape = ", ".join([*map(repr, self.prefix), "user_id", "[session_id]"])
            raise InvalidNamespaceError(f"memstack namespaces are ({shape}), got {namespace!r}")
        if len(namespace) > n + 2:
            raise InvalidNamespaceError(f"memstack namespaces have at most {n + 2} parts, got {namespace!r}")
        user = namespace[n]
        self._users.add(user)
        return user, namespace[n + 1] if len(namespace) > n + 1 else None

    def _namespace_of(self, memory: Memory) -> tuple[str, ...]:
        if memory.scope == Scope.CONTEXT and memory.session_id:
            return (*self.prefix, memory.user_id, memory.session_id)
        return (*self.prefix, memory.user_id)

    @staticmethod
    def _memstack_key(session: str | None, key: str) -> str:
        """One memstack key per (namespace, key) of a user, whatever characters the key has."""
        digest = hashlib.blake2b(json.dumps([session, key]).encode(), digest_size=16).hexdigest()
        return f"lg.{digest}"

    # ------------------------------------------------------------------ items
    def _item(self, memory: Memory, score: float | None = None) -> SearchItem:
        meta = memory.metadata
        if KEY in meta:
            value = json.loads(meta.get(VALUE) or "{}")
            if meta.get(TEXT):
                value[meta[TEXT]] = memory.content
            elif not value:
                value = json.loads(memory.content)
            key = str(meta[KEY])
            created = datetime.fromisoformat(str(meta.get(CREATED) or memory.created_at.isoformat()))
        else:  # a memory memstack extracted itself
            value = {"content": memory.content, "kind": str(memory.kind), "category": memory.category}
            key, created = memory.id, memory.created_at
        return SearchItem(self._namespace_of(memory), key, value, created, memory.created_at, score)

    def _get(self, op: GetOp) -> Item | None:
        user, session = self._where(op.namespace, exact=True)
        memory: Memory | None
        try:
            memory = self.client.call(calls.get_key(self._memstack_key(session, op.key), user_id=user))
        except MemoryApiError as exc:
            if exc.status != 404:
                raise
            memory = self._own_memory(op.namespace, op.key, user)
        if memory is None:
            return None
        found = self._item(memory)
        return Item(
            value=found.value,
            key=found.key,
            namespace=found.namespace,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )

    def _own_memory(self, namespace: tuple[str, ...], memory_id: str, user: str) -> Memory | None:
        """A memory memstack extracted, addressed by its id (current, in this namespace), or ``None``."""
        try:
            memory = self.client.call(calls.get(memory_id, user_id=user))
        except MemoryApiError as exc:
            if exc.status in (404, 422):
                return None
            raise
        if not memory.is_current or memory.deleted or self._namespace_of(memory) != tuple(namespace):
            return None
        return memory

    def _put(self, op: PutOp) -> None:
        user, session = self._where(op.namespace, exact=True)
        mkey = self._memstack_key(session, op.key)
        if op.value is None:
            self._delete(op.namespace, op.key, user, mkey)
            return
        text, field, rest = split_value(op.value)
        try:
            previous = self.client.call(calls.get_key(mkey, user_id=user))
            created = str(previous.metadata.get(CREATED) or previous.created_at.isoformat())
        except MemoryApiError as exc:
            if exc.status != 404:
                raise
            created = datetime.now().astimezone().isoformat()
        extra = json.dumps(rest, ensure_ascii=False, sort_keys=True)
        if len(extra) > 1000 or len(op.key) > 1000:
            raise ValueError("memstack keeps at most 1000 characters of a value besides its text field")
        metadata = {KEY: op.key, VALUE: extra, TEXT: field, CREATED: created, **filterable_fields(rest)}
        scope = Scope.CONTEXT if session else Scope.USER
        self.client.call(
            calls.put_key(mkey, text, user_id=user, session_id=session, scope=str(scope), metadata=metadata)
        )

    def _delete(self, namespace: tuple[str, ...], key: str, user: str, mkey: str) -> None:
        try:
            self.client.call(calls.delete_key(mkey, user_id=user))
            return
        except MemoryApiError as exc:
            if exc.status != 404:
                raise
        if self._own_memory(namespace, key, user) is not None:
            self.client.call(calls.delete(key, user_id=user))

    # ----------------------------------------------------------------- search
    def _candidates(self, op: SearchOp, user: str, session: str | None) -> Iterator[SearchItem]:
        pushed = pushed_filter(op.filter)
        if op.query:
            # Only what memstack cannot filter itself needs more candidates than the page.
            exact = len(pushed) == len(op.filter or {})
            wanted = min(MAX_SEARCH, op.offset + op.limit) if exact else MAX_SEARCH
            found = self.client.call(
                calls.search(
                    op.query,
                    user_id=user,
                    top_k=wanted,
                    session_id=session,
                    session_mode="visible",  # a session namespace also sees its user's items
                    filters={"tier": "ltm"},
                    metadata=pushed or None,
                )
            )
            for hit in found.results:
                yield self._item(hit, hit.score)
            return
        cursor = None
        while True:
            page = self.client.call(
                calls.list_memories(
                    user_id=user,
                    limit=100,
                    cursor=cursor,
                    session_id=session,
                    session_mode="visible",
                    tier=str(Tier.LTM),
                    metadata=pushed or None,
                )
            )
            for memory in page.memories:
                yield self._item(memory)
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def _search(self, op: SearchOp) -> list[SearchItem]:
        user, session = self._where(op.namespace_prefix, exact=False)
        prefix = tuple(op.namespace_prefix)
        out: list[SearchItem] = []
        for item in self._candidates(op, user, session):
            if item.namespace[: len(prefix)] != prefix:
                continue
            if op.filter and not all(_compare_values(item.value.get(k), v) for k, v in op.filter.items()):
                continue
            out.append(item)
            if len(out) >= op.offset + op.limit:
                break
        return out[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        n = len(self.prefix)
        users = set(self._users)
        for condition in op.match_conditions or ():
            path = condition.path
            if condition.match_type == "prefix" and len(path) > n and path[n] != "*":
                users.add(path[n])
        namespaces: set[tuple[str, ...]] = set()
        for user in sorted(users):
            for memory in self._every_memory(user):
                namespaces.add(self._namespace_of(memory))
        found = [ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            found = list({ns[: op.max_depth] for ns in found})
        return sorted(found)[op.offset : op.offset + op.limit]

    def _every_memory(self, user: str) -> Iterator[Memory]:
        cursor = None
        while True:
            page = self.client.call(calls.list_memories(user_id=user, limit=500, cursor=cursor, tier="ltm"))
            yield from page.memories
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    # ------------------------------------------------------------- BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise ValueError(f"unknown store operation {op!r}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The same operations on a worker thread (the client is blocking; the event loop is not)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))
