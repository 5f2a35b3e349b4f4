"""One suite, two stores: LangGraph's own ``InMemoryStore`` (the reference) and ``MemstackStore``.

Every test runs on both and asserts the same outcome (issue 26): namespaces of any depth and
under any prefix, a search across users, a query search that sees a user's session items,
LangGraph's order without a query (so ``limit`` / ``offset`` pages agree), ``index=False`` and
index ``fields``, ``list_namespaces`` from a store that has seen nothing yet, filters. The
reference gets an index whose embedding is a bag of words, so "the item sharing the query's
words ranks first" holds for both (memstack ranks with its own pipeline).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from memstack.client.sync import MemoryClient
from memstack.integrations.langgraph_store import MemstackStore

DIMS = 256
ANN, BOB = ("memories", "ann"), ("memories", "bob")


class Words(Embeddings):
    """A bag-of-words embedding: texts sharing words are near, others are not."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        vector = [0.0] * DIMS
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIMS] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]


Factory = Callable[..., BaseStore]


@pytest.fixture(params=["in-memory", "memstack"])
def make(request: pytest.FixtureRequest) -> Iterator[Factory]:
    """A store of either kind; each call on memstack is a new store over the same data (a new process)."""
    if request.param == "in-memory":
        reference = InMemoryStore(index={"dims": DIMS, "embed": Words(), "fields": ["content"]})
        yield lambda: reference
    else:
        client: MemoryClient = request.getfixturevalue("local_client")
        yield lambda: MemstackStore(client, prefix=("memories",), index={"dims": DIMS, "fields": ["content"]})


def keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


def test_namespaces_of_any_depth_and_prefix(make: Factory) -> None:
    store = make()
    places = [
        ANN,
        (*ANN, "s1"),
        (*ANN, "projects", "falcon"),
        ("docs", "ann"),
        ("docs", "ann", "a", "b", "c"),
    ]
    for n, namespace in enumerate(places):
        store.put(namespace, "k", {"content": f"item {n}", "n": n})
    for n, namespace in enumerate(places):
        item = store.get(namespace, "k")
        assert (
            item is not None
            and item.value == {"content": f"item {n}", "n": n}
            and item.namespace == namespace
        )
    assert store.get((*ANN, "projects"), "k") is None  # a prefix is not the namespace
    assert [i.value["n"] for i in store.search(ANN)] == [0, 1, 2]
    assert [i.value["n"] for i in store.search(("docs",))] == [3, 4]
    assert [i.value["n"] for i in store.search((*ANN, "projects"))] == [2]
    store.delete(("docs", "ann", "a", "b", "c"), "k")
    assert store.get(("docs", "ann", "a", "b", "c"), "k") is None
    assert [i.value["n"] for i in store.search(("docs",))] == [3]


def test_a_search_across_users(make: Factory) -> None:
    store = make()
    store.put(ANN, "diet", {"content": "Ann is vegetarian"})
    store.put(BOB, "diet", {"content": "Bob eats everything"})
    store.put(("elsewhere", "cy"), "diet", {"content": "Cy eats fish"})
    assert [(i.namespace, i.key) for i in store.search(("memories",))] == [(ANN, "diet"), (BOB, "diet")]
    found = store.search(("memories",), query="what does Bob eat", limit=1)
    assert [(i.namespace, i.key) for i in found] == [(BOB, "diet")]
    assert found[0].score is not None


def test_a_user_search_sees_its_session_items_with_or_without_a_query(make: Factory) -> None:
    store = make()
    store.put(ANN, "diet", {"content": "Ann is vegetarian"})
    store.put((*ANN, "s1"), "mood", {"content": "Ann is tired after the night shift"})
    assert keys(store.search(ANN)) == ["diet", "mood"]
    assert keys(store.search(ANN, query="night shift tired", limit=1)) == ["mood"]
    assert keys(store.search((*ANN, "s1"), query="vegetarian")) == ["mood"]  # only the session's


def test_without_a_query_pages_follow_the_order_of_first_writes(make: Factory) -> None:
    store = make()
    for name in ["c", "a", "d", "b", "e"]:
        store.put(ANN, name, {"content": f"note {name}"})
    store.put((*ANN, "s1"), "z", {"content": "note z"})
    store.put(ANN, "f", {"content": "note f"})
    store.put(ANN, "a", {"content": "note a, rewritten"})  # keeps its place
    order = ["c", "a", "d", "b", "e", "f", "z"]  # the user's namespace was written to first
    assert keys(store.search(ANN, limit=100)) == order
    pages = [keys(store.search(ANN, limit=3, offset=start)) for start in (0, 3, 6)]
    assert pages == [order[0:3], order[3:6], order[6:]]
    store.delete(ANN, "d")
    assert keys(store.search(ANN, limit=3, offset=2)) == ["b", "e", "f"]


def test_index_false_items_are_found_but_ranked_last_without_a_score(make: Factory) -> None:
    store = make()
    store.put(ANN, "secret", {"content": "the wifi password is hunter2"}, index=False)
    store.put(ANN, "wifi", {"content": "the wifi router is in the hall"})
    store.put(ANN, "cat", {"content": "Ann has a cat named Miso"})
    found = store.search(ANN, query="wifi password", limit=10)
    assert keys(found)[-1] == "secret" and found[-1].score is None
    assert keys(found)[0] == "wifi" and all(i.score is not None for i in found[:-1])
    assert keys(store.search(ANN, query="wifi password", limit=2)) == ["wifi", "cat"]
    assert "secret" in keys(store.search(ANN))  # a listing has every item
    assert store.get(ANN, "secret").value == {"content": "the wifi password is hunter2"}


def test_index_fields_choose_what_a_query_matches(make: Factory) -> None:
    store = make()
    store.put(ANN, "recipe", {"title": "apple pie", "body": "banana bread on the side"}, index=["title"])
    store.put(ANN, "split", {"title": "banana split", "body": "three scoops"}, index=["title"])
    store.put(ANN, "both", {"title": "fruit salad", "body": "kiwi and mango"}, index=["title", "body"])
    assert keys(store.search(ANN, query="banana", limit=1)) == ["split"]
    assert keys(store.search(ANN, query="apple pie", limit=1)) == ["recipe"]
    assert keys(store.search(ANN, query="kiwi mango", limit=1)) == ["both"]
    assert store.get(ANN, "recipe").value == {"title": "apple pie", "body": "banana bread on the side"}
    assert store.get(ANN, "both").value == {"title": "fruit salad", "body": "kiwi and mango"}


def test_list_namespaces_from_a_store_that_has_seen_nothing(make: Factory) -> None:
    writer = make()
    for namespace in [ANN, (*ANN, "s1"), (*ANN, "projects", "x"), BOB, ("docs", "ann")]:
        writer.put(namespace, "k", {"content": "x"})
    reader = make()  # memstack: a new store, as a new process would make
    assert reader.list_namespaces() == sorted(
        [ANN, (*ANN, "projects", "x"), (*ANN, "s1"), BOB, ("docs", "ann")]
    )
    assert reader.list_namespaces(prefix=ANN) == [ANN, (*ANN, "projects", "x"), (*ANN, "s1")]
    assert reader.list_namespaces(prefix=("memories",), max_depth=2) == [ANN, BOB]
    assert reader.list_namespaces(suffix=("s1",)) == [(*ANN, "s1")]
    assert reader.list_namespaces(prefix=("memories", "*"), limit=2, offset=1) == [
        (*ANN, "projects", "x"),
        (*ANN, "s1"),
    ]


def test_filters_match_as_langgraph_matches_them(make: Factory) -> None:
    store = make()
    store.put(ANN, "a", {"content": "one", "status": "done", "n": 1, "tags": ["x", "y"]})
    store.put(ANN, "b", {"content": "two", "status": "open", "n": 2})
    store.put(ANN, "c", {"content": "three", "status": "done", "n": 3})
    assert keys(store.search(ANN, filter={"status": "done"})) == ["a", "c"]
    assert keys(store.search(ANN, filter={"n": {"$gt": 1}})) == ["b", "c"]
    assert keys(store.search(ANN, filter={"status": {"$ne": "done"}})) == ["b"]
    assert keys(store.search(ANN, filter={"tags": ["x", "y"]})) == ["a"]
    assert keys(store.search(ANN, query="three", filter={"status": "done"}, limit=1)) == ["c"]


def test_items_read_back_as_written(make: Factory) -> None:
    store = make()
    store.put(ANN, "json", {"score": 3, "nested": {"a": [1, 2]}})
    store.put(ANN, "text", {"text": "Ann lives in Osaka", "confidence": 0.9})
    store.put(ANN, "text", {"text": "Ann lives in Kyoto", "confidence": 0.8})
    assert store.get(ANN, "json").value == {"score": 3, "nested": {"a": [1, 2]}}
    updated = store.get(ANN, "text")
    assert updated.value == {"text": "Ann lives in Kyoto", "confidence": 0.8}
    assert updated.created_at <= updated.updated_at
    store.put(ANN, "json", None)  # put(None) deletes
    assert store.get(ANN, "json") is None and keys(store.search(ANN)) == ["text"]
