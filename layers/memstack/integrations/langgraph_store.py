"""``MemstackStore``: memstack as LangGraph's long-term memory (``langgraph.store.base.BaseStore``).

It answers as LangGraph's own ``InMemoryStore`` (with an index) does, on memstack's users:

- A namespace is any tuple of labels; the label after the first ``len(prefix)`` ones is the
  memstack user (``prefix=("memories",)``: ``("memories", "ann", ...)`` is user ``ann``;
  any labels may stand before it, and any number after it, up to ``MAX_DEPTH`` in all).
  A search's namespace prefix may stop before the user: ``search(("memories",))`` reads
  every user of the tenant (``GET /v1/users``), and so does ``list_namespaces``.
- ``put`` writes a keyed memory (``PUT /v1/memories/keys/{key}``): the text memstack embeds
  and indexes is the value's ``index`` fields (or the store's ``index={"fields": [...]}``),
  else its ``content`` / ``text`` / ``memory`` / ``data`` field, else the value as JSON; the
  rest of the value rides in its metadata. Writing the key again makes a new version,
  ``delete`` writes a tombstone. ``index=False`` items are found by every search without a
  query, and by a query only after the items it ranks (score ``None``), as LangGraph does.
- ``search`` without a query lists in LangGraph's order (namespace by namespace in the order
  each was first written to, items in the order each key was first written), so ``limit`` /
  ``offset`` pages match; with a query it is memstack's retrieval pipeline (BM25 + vectors,
  temporal boost), which also finds the memories memstack extracted from the user's
  conversations: those come back in the user's namespace ``(*prefix, user)`` with their
  memory id as the key and ``{"content", "kind", "category"}`` as the value.
- Filters use LangGraph's own matching (``$eq``, ``$ne``, ``$gt`` ...); an equality on a
  string field, and the namespace, are also sent to memstack as metadata filters (each string
  field of a value is kept as metadata ``lg.<field>``), so a query ranks only the items that
  can match.

Where it differs (memstack keeps users, versions and its own ranking): the user label must be
a memstack user id; a namespace holds at most ``MAX_DEPTH`` labels; ``created_at`` is the
first write of the key (``InMemoryStore`` resets it on every put; LangGraph's Postgres store
keeps it); a query search returns at most ``MAX_SEARCH`` items (offset included) and ranks by
memstack's calibrated score, not plain cosine; TTLs are not supported (``supports_ttl =
False``); an item an earlier memstack wrote under ``(*prefix, user, session)`` is a CONTEXT memory of
that session, which a query outside the session does not see (put it again to move it).

Backed by a ``MemoryClient`` (any memstack API), or by a service in this process:
``MemstackStore.in_process(service, settings, tenant)``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

# LangGraph's own namespace and filter matching, so this store answers exactly as its stores do.
from langgraph.store.memory import _compare_values, _does_match

from memstack.api.schemas import ID_PATTERN, Memory
from memstack.client import calls
from memstack.client.errors import MemoryApiError
from memstack.client.sync import MemoryClient
from memstack.models import Scope, Tier

TEXT_FIELDS = ("content", "text", "memory", "data")
MAX_SEARCH = 100  # the API's default MEMSTACK_MAX_TOP_K
#: labels a namespace may have (each depth is a metadata key of the item, for filtering)
MAX_DEPTH = 8
# Metadata of a memory written through the store.
KEY, VALUE, TEXT, CREATED = "lg_key", "lg_value", "lg_text", "lg_created"
#: on every item the store writes (``ne`` also matches a memory without it: one memstack made)
ITEM = "lg_item"
#: set on an item ``put`` with ``index=False``: a query ranks it after everything else
UNINDEXED = "lg_unindexed"
#: ``lg_ns<d>``: the item's namespace cut to ``d`` labels, as JSON (the deepest is the whole of it)
NS = "lg_ns"
#: a value's string fields, as metadata keys memstack can filter on (``lg.<field>``)
FIELD_PREFIX = "lg."
_FILTERABLE_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,61}$")
#: the API's limit on metadata keys (50), less the store's own
MAX_FILTERABLE = 50 - 6 - MAX_DEPTH
# The fields of extracted memories' values are record fields, not metadata: never sent as filters.
_NOT_METADATA = frozenset((*TEXT_FIELDS, "kind", "category"))
_USER_ID = re.compile(ID_PATTERN[:-1] + r"\Z")


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


@dataclass(frozen=True)
class Stored:
    """How a value is kept: the text memstack indexes, how to rebuild the value, the rest."""

    text: str
    #: ``lg_text``: the text's field name ("" for JSON), or the JSON of [[field, length], ...]
    layout: str
    rest: dict[str, Any]
    #: False: the index fields hold no text (LangGraph embeds nothing: a query ranks it last)
    indexed: bool = True


def stored_value(value: Mapping[str, Any], paths: list[str] | None) -> Stored:
    """The text of ``value`` to index (``paths``: LangGraph index fields) and what rebuilds it."""
    if paths:
        names = list(dict.fromkeys(paths))
        if all(isinstance(value.get(p), str) and len(tokenize_path(p)) == 1 for p in names):
            # Top-level string fields: the text is them, joined; their lengths split it back.
            texts = [value[p] for p in names]
            layout = json.dumps([[p, len(t)] for p, t in zip(names, texts, strict=True)])
            return Stored("\n".join(texts), layout, {k: v for k, v in value.items() if k not in names})
        texts = [t for p in names for t in get_text_at_path(dict(value), p)]
        text = "\n".join(texts) or json.dumps(value, ensure_ascii=False, sort_keys=True)
        return Stored(text, "*", dict(value), indexed=bool(texts))
    for name in TEXT_FIELDS:
        field = value.get(name)
        if isinstance(field, str) and field.strip():
            return Stored(field, name, {k: v for k, v in value.items() if k != name})
    return Stored(json.dumps(value, ensure_ascii=False, sort_keys=True), "", {})


def rebuilt_value(content: str, layout: str, rest: dict[str, Any]) -> dict[str, Any]:
    """The value ``stored_value`` split, from the memory's text and metadata."""
    if layout == "*":
        return rest
    if layout.startswith("["):
        value, start = dict(rest), 0
        for name, length in json.loads(layout):
            value[name] = content[start : start + length]
            start += length + 1
        return value
    if layout:
        return {**rest, layout: content}
    return rest or json.loads(content)


class MemstackStore(BaseStore):
    supports_ttl = False

    def __init__(
        self, client: MemoryClient, *, prefix: tuple[str, ...] = (), index: IndexConfig | None = None
    ) -> None:
        """``prefix``: the labels before the user id (their number places the user); ``index``:
        LangGraph's index configuration, of which ``fields`` is used (memstack embeds itself)."""
        self.client = client
        self.prefix = tuple(prefix)
        self.fields: list[str] | None = list((index or {}).get("fields") or []) or None

    @classmethod
    def in_process(cls, service: Any, settings: Any, tenant: str, **kwargs: Any) -> MemstackStore:
        """A store over a ``MemoryService`` in this process (its REST API, without a socket)."""
        from memstack.client.in_process import in_process_client, wsgi_api

        return cls(in_process_client(wsgi_api(service, settings, tenant)), **kwargs)

    # ------------------------------------------------------------ namespaces
    def _user(self, namespace: tuple[str, ...]) -> str:
        """The memstack user of an item's namespace (the label after the prefix's labels)."""
        n = len(self.prefix)
        if len(namespace) <= n:
            raise InvalidNamespaceError(
                f"memstack keeps items per user: a namespace needs a user id after its first {n} "
                f"label(s), got {namespace!r}"
            )
        if len(namespace) > MAX_DEPTH:
            raise InvalidNamespaceError(
                f"memstack namespaces have at most {MAX_DEPTH} labels, got {namespace!r}"
            )
        user = namespace[n]
        if not _USER_ID.match(user) or len(user) > 128:
            raise InvalidNamespaceError(
                f"{user!r} (label {n + 1} of {namespace!r}) is not a memstack user id: 1-128 letters, "
                "digits and ._@:+=- starting with a letter or digit"
            )
        return user

    def _home(self, user: str) -> tuple[str, ...]:
        """Where memstack's own memories of a user are: ``(*prefix, user)``."""
        return (*self.prefix, user)

    def _namespace_of(self, memory: Memory) -> tuple[str, ...]:
        meta = memory.metadata
        for depth in range(MAX_DEPTH, 0, -1):
            if isinstance(meta.get(f"{NS}{depth}"), str):
                return tuple(json.loads(meta[f"{NS}{depth}"]))
        # Written before namespaces were kept (a session was a CONTEXT memory), or by memstack itself.
        if memory.scope == Scope.CONTEXT and memory.session_id:
            return (*self._home(memory.user_id), memory.session_id)
        return self._home(memory.user_id)

    def _memstack_key(self, namespace: tuple[str, ...], key: str) -> str:
        """One memstack key per (namespace, key) of a user, whatever characters the key has."""
        n = len(self.prefix)
        head, rest = namespace[:n], namespace[n + 1 :]
        # The shapes earlier versions wrote, (*prefix, user[, session]), keep their keys.
        parts: list[Any] = (
            [rest[0] if rest else None, key]
            if head == self.prefix and len(rest) <= 1
            else [
                list(head),
                list(rest),
                key,
            ]
        )
        digest = hashlib.blake2b(json.dumps(parts).encode(), digest_size=16).hexdigest()
        return f"lg.{digest}"

    def _namespace_where(self, prefix: tuple[str, ...], user: str) -> dict[str, Any] | None:
        """The memstack filter keeping a user's items under ``prefix`` (memstack's own memories too
        when ``prefix`` leads to the user's home)."""
        if not prefix:
            return None
        mine = {f"metadata.{NS}{len(prefix)}": json.dumps(list(prefix))}
        if self._home(user)[: len(prefix)] == prefix:
            return {"OR": [mine, {f"metadata.{ITEM}": {"ne": True}}]}
        return mine

    # ------------------------------------------------------------------ items
    def _item(self, memory: Memory, score: float | None = None) -> SearchItem:
        meta = memory.metadata
        if KEY in meta:
            rest = json.loads(meta.get(VALUE) or "{}")
            value = rebuilt_value(memory.content, str(meta.get(TEXT) or ""), rest)
            key = str(meta[KEY])
            created = datetime.fromisoformat(str(meta.get(CREATED) or memory.created_at.isoformat()))
        else:  # a memory memstack extracted itself
            category = str(memory.category) if memory.category is not None else None
            value = {"content": memory.content, "kind": str(memory.kind), "category": category}
            key, created = memory.id, memory.created_at
        return SearchItem(self._namespace_of(memory), key, value, created, memory.created_at, score)

    def _get(self, op: GetOp) -> Item | None:
        user = self._user(op.namespace)
        memory: Memory | None
        try:
            memory = self.client.call(calls.get_key(self._memstack_key(op.namespace, op.key), user_id=user))
        except MemoryApiError as exc:
            if exc.status != 404:
                raise
            memory = self._own_memory(op.namespace, op.key, user)
        if memory is None or self._namespace_of(memory) != tuple(op.namespace):
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
        if not memory.is_current or memory.deleted or KEY in memory.metadata:
            return None
        return memory if self._namespace_of(memory) == tuple(namespace) else None

    def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        user = self._user(namespace)
        mkey = self._memstack_key(namespace, op.key)
        if op.value is None:
            self._delete(namespace, op.key, user, mkey)
            return
        paths = None if op.index is False else (list(op.index) if op.index else self.fields)
        kept = stored_value(op.value, paths)
        try:
            previous = self.client.call(calls.get_key(mkey, user_id=user))
            created = str(previous.metadata.get(CREATED) or previous.created_at.isoformat())
        except MemoryApiError as exc:
            if exc.status != 404:
                raise
            created = datetime.now().astimezone().isoformat()
        extra = json.dumps(kept.rest, ensure_ascii=False, sort_keys=True)
        if len(extra) > 1000 or len(op.key) > 1000:
            raise ValueError("memstack keeps at most 1000 characters of a value besides its indexed text")
        depths = {f"{NS}{d}": json.dumps(list(namespace[:d])) for d in range(1, len(namespace) + 1)}
        if any(len(v) > 1000 for v in depths.values()):
            raise ValueError("memstack keeps a namespace of at most 1000 characters (as JSON)")
        metadata: dict[str, Any] = {
            KEY: op.key,
            VALUE: extra,
            TEXT: kept.layout,
            CREATED: created,
            ITEM: True,
            **depths,
            **filterable_fields(kept.rest),
        }
        if op.index is False or not kept.indexed:
            metadata[UNINDEXED] = True
        rest = namespace[len(self.prefix) + 1 :]
        # (*prefix, user, session): the session is memstack's too (REST's session_id= finds it).
        session = rest[0] if len(rest) == 1 and _USER_ID.match(rest[0]) and len(rest[0]) <= 128 else None
        self.client.call(
            calls.put_key(
                mkey, kept.text, user_id=user, session_id=session, scope=str(Scope.USER), metadata=metadata
            )
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
    def _users(self, prefix: tuple[str, ...]) -> list[str]:
        """The users a namespace prefix reaches: the one it names, or every user of the tenant."""
        if len(prefix) > len(self.prefix):
            return [self._user(prefix)]
        return [u.user_id for u in self.client.iter_users()]

    def _listed(self, prefix: tuple[str, ...], user: str) -> Iterator[Memory]:
        """Every current memory (tier ltm) of ``user`` under ``prefix``, as memstack lists them."""
        cursor = None
        while True:
            page = self.client.call(
                calls.list_memories(
                    user_id=user,
                    limit=500,
                    cursor=cursor,
                    tier=str(Tier.LTM),
                    where=self._namespace_where(prefix, user),
                )
            )
            yield from page.memories
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def _in_order(self, prefix: tuple[str, ...]) -> list[tuple[SearchItem, bool]]:
        """Every item under ``prefix`` in LangGraph's order: namespaces by their first write, then
        items by theirs (what ``InMemoryStore`` iterates without a query); with whether it is
        left out of a query's ranking (``index=False``)."""
        items = [
            (self._item(memory), bool(memory.metadata.get(UNINDEXED)))
            for user in self._users(prefix)
            for memory in self._listed(prefix, user)
        ]
        items = [(item, unindexed) for item, unindexed in items if item.namespace[: len(prefix)] == prefix]
        first: dict[tuple[str, ...], datetime] = {}
        for item, _ in items:
            first[item.namespace] = min(first.get(item.namespace, item.created_at), item.created_at)
        return sorted(items, key=lambda pair: (first[pair[0].namespace], pair[0].created_at, pair[0].key))

    def _ranked(self, op: SearchOp, prefix: tuple[str, ...], wanted: int) -> list[SearchItem]:
        """The items under ``prefix`` a query ranks, best first (every user's, merged by score)."""
        pushed = pushed_filter(op.filter)
        found: list[SearchItem] = []
        for user in self._users(prefix):
            where: dict[str, Any] = {f"metadata.{UNINDEXED}": {"ne": True}}
            namespaced = self._namespace_where(prefix, user)
            answer = self.client.call(
                calls.search(
                    str(op.query),
                    user_id=user,
                    top_k=wanted,
                    filters={"tier": "ltm"},
                    metadata=pushed or None,
                    where={"AND": [where, namespaced]} if namespaced else where,
                )
            )
            found += [self._item(hit, hit.score) for hit in answer.results]
        return sorted(found, key=lambda i: -(i.score or 0.0))

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)

        def kept(item: SearchItem) -> bool:
            if item.namespace[: len(prefix)] != prefix:
                return False
            return not op.filter or all(_compare_values(item.value.get(k), v) for k, v in op.filter.items())

        if not op.query:
            return [i for i, _ in self._in_order(prefix) if kept(i)][op.offset : op.offset + op.limit]
        exact = len(pushed_filter(op.filter)) == len(op.filter or {})
        wanted = min(MAX_SEARCH, op.offset + op.limit) if exact else MAX_SEARCH
        ranked = [i for i in self._ranked(op, prefix, wanted) if kept(i)]
        page = ranked[op.offset : op.offset + op.limit]
        if len(page) < op.limit:
            # As LangGraph: items not indexed follow what the query ranked, without a score.
            unindexed = [i for i, left_out in self._in_order(prefix) if left_out and kept(i)]
            page += unindexed[: op.limit - len(page)]
        return page

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        n = len(self.prefix)
        users: list[str] | None = None
        for condition in op.match_conditions or ():
            path = condition.path
            if condition.match_type == "prefix" and len(path) > n and path[n] != "*":
                users = [self._user(tuple(path[: n + 1]))]
        namespaces = {
            self._namespace_of(memory)
            for user in (users if users is not None else self._users(()))
            for memory in self._listed((), user)
        }
        found = [ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            found = list({ns[: op.max_depth] for ns in found})
        return sorted(found)[op.offset : op.offset + op.limit]

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
