"""``MemstackStore`` against LangGraph's own semantics: the same operations on LangGraph's
``InMemoryStore`` (the reference) and on memstack must be observed the same way; then a graph."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError
from langgraph.store.memory import InMemoryStore
from memstack.client.sync import MemoryClient
from memstack.integrations.langgraph_store import MemstackStore
from memstack.service import MemoryService
from memstack.settings import Settings

ANN = ("memories", "ann")
ANN_S1 = ("memories", "ann", "s1")


@pytest.fixture
def store(local_client: MemoryClient) -> MemstackStore:
    return MemstackStore(local_client, prefix=("memories",))


def observe(store: BaseStore) -> list[Any]:
    """A script of puts, updates, deletes and reads; what each read saw."""
    seen: list[Any] = []
    store.put(ANN, "diet", {"content": "Ann is vegetarian", "source": "chat"})
    store.put(ANN, "city", {"text": "Ann lives in Osaka", "confidence": 0.9})
    store.put(ANN_S1, "mood", {"memory": "Ann is tired today"})
    store.put(("memories", "bob"), "diet", {"content": "Bob eats everything"})
    store.put(ANN, "json-only", {"score": 3, "tags": ["a", "b"]})
    seen.append(store.get(ANN, "diet").value)
    seen.append(store.get(ANN, "nope"))
    store.put(ANN, "diet", {"content": "Ann is vegan", "source": "form"})  # an update
    seen.append(store.get(ANN, "diet").value)
    seen.append(store.get(("memories", "bob"), "diet").value)
    seen.append(store.get(ANN_S1, "mood").value)
    seen.append(store.get(ANN, "mood"))  # the session's item is not in the user's namespace
    seen.append(sorted(i.key for i in store.search(ANN)))
    seen.append(sorted(i.key for i in store.search(ANN_S1)))
    seen.append(sorted(i.key for i in store.search(ANN, filter={"source": "form"})))
    seen.append(sorted(i.key for i in store.search(ANN, filter={"confidence": 0.9})))
    seen.append(sorted(i.key for i in store.search(ANN, filter={"tags": ["a", "b"]})))
    seen.append(sorted(i.key for i in store.search(ANN, filter={"source": {"$ne": "form"}})))
    seen.append(len(store.search(ANN, limit=2)))
    seen.append(len(store.search(ANN, limit=10, offset=3)))
    store.delete(ANN, "city")
    seen.append(store.get(ANN, "city"))
    store.put(ANN, "city", {"text": "Ann lives in Kyoto"})  # written again after a delete
    seen.append(store.get(ANN, "city").value)
    store.put(ANN, "json-only", None)  # put(None) deletes
    seen.append(store.get(ANN, "json-only"))
    seen.append(store.list_namespaces(prefix=("memories", "ann")))
    seen.append(store.list_namespaces(prefix=("memories", "ann"), max_depth=2))
    seen.append(store.list_namespaces(prefix=("memories", "ann"), suffix=("s1",)))
    return seen


def test_memstack_answers_as_langgraphs_in_memory_store(store: MemstackStore) -> None:
    assert observe(store) == observe(InMemoryStore())


def test_created_at_survives_updates_and_updated_at_moves(store: MemstackStore) -> None:
    store.put(ANN, "diet", {"content": "Ann is vegetarian"})
    first = store.get(ANN, "diet")
    store.put(ANN, "diet", {"content": "Ann is vegan"})
    second = store.get(ANN, "diet")
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at


def test_search_with_a_query_ranks_by_meaning_and_finds_extracted_memories(
    store: MemstackStore, local_client: MemoryClient
) -> None:
    store.put(ANN, "diet", {"content": "Ann is vegetarian and allergic to peanuts"})
    store.put(ANN, "job", {"content": "Ann works as a nurse in Osaka"})
    # Something Ann said in a conversation, extracted by memstack (not put through the store).
    local_client.add("I play the violin every evening.", user_id="ann", sync=True)
    food = store.search(ANN, query="what food should I avoid for Ann?", limit=2)
    assert food[0].key == "diet" and food[0].score is not None
    music = store.search(ANN, query="violin", limit=5)
    extracted = next(i for i in music if "violin" in i.value["content"])
    assert extracted.namespace == ANN and extracted.value["kind"] in ("fact", "event", "preference")
    # Plain strings, as a value LangGraph stored would hold (the category was an enum object).
    assert type(extracted.value["category"]) is str and type(extracted.value["kind"]) is str
    # The extracted memory is addressable by its id, like any item, and can be deleted.
    assert store.get(ANN, extracted.key).value == extracted.value
    store.delete(ANN, extracted.key)
    assert store.get(ANN, extracted.key) is None


def test_a_namespace_must_name_a_memstack_user(store: MemstackStore) -> None:
    with pytest.raises(InvalidNamespaceError, match="needs a user id after its first 1 label"):
        store.put(("memories",), "k", {"content": "x"})
    with pytest.raises(InvalidNamespaceError, match="is not a memstack user id"):
        store.put(("memories", "ann smith"), "k", {"content": "x"})
    with pytest.raises(InvalidNamespaceError, match="at most 8 labels"):
        store.put(("memories", "ann", *"abcdefg"), "k", {"content": "x"})
    with pytest.raises(NotImplementedError):
        store.put(ANN, "k", {"content": "x"}, ttl=5)  # memstack memories do not expire


def test_items_an_earlier_version_wrote_are_still_read(
    store: MemstackStore, local_client: MemoryClient
) -> None:
    """Before namespaces were kept, (prefix, user, session) was a CONTEXT memory of the session."""
    for namespace, key, text in [(ANN, "diet", "Ann is vegan"), (ANN_S1, "mood", "Ann is tired")]:
        session = namespace[2] if len(namespace) > 2 else None
        local_client.put_key(
            store._memstack_key(namespace, key),
            text,
            user_id="ann",
            session_id=session,
            scope="CONTEXT" if session else "USER",
            metadata={
                "lg_key": key,
                "lg_value": "{}",
                "lg_text": "content",
                "lg_created": "2026-01-01T00:00:00+00:00",
            },
        )
    assert store.get(ANN, "diet").value == {"content": "Ann is vegan"}
    assert store.get(ANN_S1, "mood").value == {"content": "Ann is tired"}
    assert [i.key for i in store.search(ANN)] == ["diet", "mood"]
    assert store.list_namespaces() == [ANN, ANN_S1]
    store.put(ANN_S1, "mood", {"content": "Ann is rested"})  # the same key: a new version
    assert [i.key for i in store.search(ANN, query="rested")][:1] == ["mood"]


def test_async_operations(store: MemstackStore) -> None:
    async def scenario() -> list[Any]:
        await store.aput(ANN, "pet", {"content": "Ann has a cat named Miso"})
        got = await store.aget(ANN, "pet")
        found = await store.asearch(ANN, query="cat")
        await store.adelete(ANN, "pet")
        return [got.value, [i.key for i in found], await store.aget(ANN, "pet")]

    assert asyncio.run(scenario()) == [{"content": "Ann has a cat named Miso"}, ["pet"], None]


def test_the_in_process_constructor_shares_the_service(service: MemoryService, settings: Settings) -> None:
    store = MemstackStore.in_process(service, settings, "local")
    store.put(("ann",), "diet", {"content": "Ann is vegan"})
    records, _ = service.list("local", "ann")
    assert [r.content for r in records] == ["Ann is vegan"]


class State(TypedDict, total=False):
    user: str
    said: str
    recalled: list[str]


def remember(state: State, *, store: BaseStore) -> State:
    store.put(("memories", state["user"]), "last-said", {"content": state["said"]})
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    hits = store.search(("memories", state["user"]), query=state["said"], limit=3)
    return {"recalled": [h.value["content"] for h in hits]}


def test_a_graph_remembers_across_threads(store: MemstackStore) -> None:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)
    graph.invoke({"user": "ann", "said": "I moved to Lisbon"}, {"configurable": {"thread_id": "t1"}})
    out = graph.invoke({"user": "ann", "said": "Lisbon"}, {"configurable": {"thread_id": "t2"}})
    # The second thread's write replaced the key; the store (memstack) kept the history.
    assert out["recalled"] == ["Lisbon"]
    latest = store.get(("memories", "ann"), "last-said")
    assert latest.value == {"content": "Lisbon"}


def test_an_equality_filter_is_applied_by_memstack_before_ranking(
    store: MemstackStore, local_client: MemoryClient
) -> None:
    """With a query and a filter, the match is found even when 100+ unfiltered items rank above it."""
    for i in range(105):
        store.put(ANN, f"tea-{i}", {"content": f"Ann drinks green tea number {i}", "source": "chat"})
    store.put(ANN, "quiet", {"content": "Ann likes quiet evenings", "source": "form", "mood": "calm"})
    found = store.search(ANN, query="green tea", filter={"source": "form"}, limit=3)
    assert [i.key for i in found] == ["quiet"]
    found = store.search(ANN, query="green tea", filter={"source": {"$eq": "form"}, "mood": "calm"})
    assert [i.key for i in found] == ["quiet"]
    # A filter memstack cannot express (here: not equal) is still applied, by LangGraph's own rules.
    assert store.search(ANN, query="quiet", filter={"source": {"$ne": "chat"}}, limit=1)[0].key == "quiet"
    # The string fields ride as filterable metadata of the memory itself.
    quiet = local_client.list(user_id="ann", metadata={"lg.mood": "calm"}).memories
    assert [m.content for m in quiet] == ["Ann likes quiet evenings"]
