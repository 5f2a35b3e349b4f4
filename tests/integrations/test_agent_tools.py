"""``remember`` / ``recall`` for Strands Agents and LangChain, without any model call: the tools
directly, and through each framework's own tool execution driven by a scripted model."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from memstack.client.sync import MemoryClient
from memstack.integrations.toolkit import ToolFailure
from strands.models.model import Model


# ------------------------------------------------------------------ Strands
class ScriptedModel(Model):
    """A Strands model that plays back turns: a tool call, or a final text; records what it was shown."""

    def __init__(self, turns: list[dict[str, Any]]) -> None:
        self.turns, self.seen = list(turns), []

    def update_config(self, **config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Any, tool_specs: Any = None, *args: Any, **kw: Any
    ) -> AsyncIterator[Any]:
        self.seen.append({"messages": messages, "tools": [t["name"] for t in tool_specs or []]})
        turn = self.turns.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if "tool" in turn:
            start = {"toolUse": {"toolUseId": f"t{len(self.seen)}", "name": turn["tool"]}}
            yield {"contentBlockStart": {"start": start}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(turn["input"])}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": turn["text"]}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}


def tool_results(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The text of every tool result the agent fed back to the model."""
    return [
        c["text"]
        for m in messages
        for block in m["content"]
        if "toolResult" in block
        for c in block["toolResult"]["content"]
        if "text" in c
    ]


def test_strands_tools_called_directly(local_client: MemoryClient) -> None:
    from memstack.integrations.strands_tools import memstack_tools

    remember, recall, *_ = memstack_tools(local_client, user_id="ann")
    assert {remember.tool_name, recall.tool_name} == {"remember", "recall"}
    assert "content" in remember.tool_spec["inputSchema"]["json"]["properties"]
    assert remember(content="I am allergic to peanuts.").startswith("remembered")
    assert "allergic to peanuts" in recall(query="peanut allergy")
    with pytest.raises(ToolFailure, match="forbidden"):
        recall(query="x", user_id="bob")
    with pytest.raises(ToolFailure, match="top_k must be between 1 and 100"):
        recall(query="x", top_k=1000)


def test_a_strands_tool_failure_reaches_the_model_as_an_error(local_client: MemoryClient) -> None:
    """Failures came back as status "success" with "error: ..." text; top_k was unbounded."""
    from memstack.integrations.strands_tools import memstack_tools
    from strands import Agent

    model = ScriptedModel(
        [
            {"tool": "recall", "input": {"query": "x", "user_id": "bob"}},
            {"tool": "recall", "input": {"query": "x", "top_k": 1000}},
            {"tool": "remember", "input": {"content": "   "}},
            {"text": "I could not."},
        ]
    )
    agent = Agent(model=model, tools=memstack_tools(local_client, user_id="ann"), callback_handler=None)
    agent("What do you know?")
    results = [b["toolResult"] for m in agent.messages for b in m["content"] if "toolResult" in b]
    assert [r["status"] for r in results] == ["error", "error", "error"]
    texts = [r["content"][0]["text"] for r in results]
    assert "forbidden" in texts[0] and "top_k must be between 1 and 100" in texts[1]
    assert "validation_error" in texts[2]


def test_a_strands_agent_remembers_and_recalls_through_its_own_tool_loop(local_client: MemoryClient) -> None:
    from memstack.integrations.strands_tools import memstack_tools
    from strands import Agent

    model = ScriptedModel(
        [
            {"tool": "remember", "input": {"content": "I moved to Lisbon last spring."}},
            {"text": "Noted."},
            {"tool": "recall", "input": {"query": "where does the user live", "top_k": 3}},
            {"text": "You live in Lisbon."},
        ]
    )
    agent = Agent(model=model, tools=memstack_tools(local_client, user_id="ann"), callback_handler=None)
    agent("I moved to Lisbon last spring.")
    reply = agent("Where do I live?")
    assert "Lisbon" in str(reply)
    assert model.seen[0]["tools"] == ["remember", "recall", "update_memory", "forget"]
    results = tool_results(agent.messages)
    assert results[0].startswith("remembered")
    assert "Lisbon" in results[1]
    # What the agent remembered is in memstack, for every other client of this user.
    assert any("Lisbon" in m.content for m in local_client.list(user_id="ann").memories)


def test_strands_memory_manager_store(local_client: MemoryClient) -> None:
    from memstack.integrations.strands_tools import MemstackMemoryStore

    store = MemstackMemoryStore(local_client, user_id="ann")

    async def scenario() -> list[Any]:
        await store.add_messages(
            [
                {"role": "user", "content": [{"text": "My sister Ana is a pilot."}]},
                {"role": "assistant", "content": [{"text": "That sounds exciting!"}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "x", "content": []}}]},
            ]
        )
        await store.add("Ann prefers window seats.", {"source": "profile", "nested": {"dropped": True}})
        return await store.search("what does Ana do?", {"max_search_results": 2})

    found = asyncio.run(scenario())
    assert found and "pilot" in found[0].content
    assert found[0].metadata and found[0].metadata["id"]
    stored = local_client.list(user_id="ann", tier="stm").memories
    assert sorted(m.content for m in stored) == [
        "Ann prefers window seats.",
        "My sister Ana is a pilot.",
        "That sounds exciting!",
    ]


# ---------------------------------------------------------------- LangChain
def test_langchain_tools_through_tool_invocation(local_client: MemoryClient) -> None:
    from memstack.integrations.langchain_tools import memstack_tools

    remember, recall, *_ = memstack_tools(local_client, user_id="ann")
    assert recall.args_schema is not None and "query" in recall.args_schema.model_json_schema()["properties"]
    # Invoked with a ToolCall, as an agent's tool node does: the answer is a ToolMessage.
    stored = remember.invoke(
        {"type": "tool_call", "id": "c1", "name": "remember", "args": {"content": "I drive a red Vespa."}}
    )
    assert stored.tool_call_id == "c1" and stored.content.startswith("remembered")
    found = recall.invoke({"query": "what do I ride", "top_k": 2})
    assert "red Vespa" in found
    # A failure is answered to the model (handle_tool_error), not raised.
    refused = recall.invoke({"query": "x", "user_id": "bob"})
    assert refused.startswith("forbidden")
    with pytest.raises(Exception):  # noqa: B017 - arguments the schema refuses never reach memstack
        recall.invoke({"query": "x", "top_k": 0})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # create_react_agent moves to langchain in v2
def test_a_langgraph_react_agent_with_a_scripted_model_uses_the_tools(local_client: MemoryClient) -> None:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langgraph.prebuilt import create_react_agent
    from memstack.integrations.langchain_tools import memstack_tools

    class ScriptedChat(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = ScriptedChat(
        responses=[
            AIMessage(
                "", tool_calls=[{"id": "c1", "name": "remember", "args": {"content": "I am a night owl."}}]
            ),
            AIMessage("", tool_calls=[{"id": "c2", "name": "recall", "args": {"query": "when do I sleep"}}]),
            AIMessage("You are a night owl."),
        ]
    )
    agent = create_react_agent(model, memstack_tools(local_client, user_id="ann"))
    out = agent.invoke({"messages": [("user", "I am a night owl. When do I sleep?")]})
    answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
    assert answers[0].startswith("remembered") and "night owl" in answers[1]
    assert out["messages"][-1].content == "You are a night owl."


def test_tools_of_an_agent_tag_what_they_remember_and_recall_only_that(local_client: MemoryClient) -> None:
    from memstack.integrations.langchain_tools import memstack_tools as langchain_tools
    from memstack.integrations.strands_tools import memstack_tools as strands_tools

    travel_remember, travel_recall, *_ = strands_tools(local_client, user_id="ann", agent_id="travel")
    food_remember, food_recall, *_ = langchain_tools(local_client, user_id="ann", agent_id="food")
    shared_recall = strands_tools(local_client, user_id="ann")[1]
    assert travel_remember(content="I always book a window seat.").startswith("remembered")
    assert food_remember.invoke({"content": "I always book a table by the window."}).startswith("remembered")
    assert "window seat" in travel_recall(query="window") and "table" not in travel_recall(query="window")
    food = food_recall.invoke({"query": "window"})
    assert "table by the window" in food and "seat" not in food
    shared = shared_recall(query="window")  # no agent: every agent's memories
    assert "window seat" in shared and "table by the window" in shared
    listed = local_client.list(user_id="ann", agent_id="travel").memories
    assert listed and {m.agent_id for m in listed} == {"travel"}


# ------------------------------------------------------- update and forget
def _recalled_id(text: str, words: str) -> str:
    """The id recall printed beside the memory holding ``words``."""
    line = next(line for line in text.splitlines() if words in line)
    return line.rsplit("(id ", 1)[1].rstrip(")")


def test_strands_update_and_forget(local_client: MemoryClient) -> None:
    from memstack.integrations.strands_tools import memstack_tools

    remember, recall, update_memory, forget = memstack_tools(local_client, user_id="ann")
    assert (update_memory.tool_name, forget.tool_name) == ("update_memory", "forget")
    schema = update_memory.tool_spec["inputSchema"]["json"]
    assert set(schema["required"]) == {"memory_id", "content"}
    remember(content="My favourite colour is green.")
    memory_id = _recalled_id(recall(query="favourite colour"), "green")
    answer = update_memory(memory_id=memory_id, content="My favourite colour is blue.")
    assert answer.startswith(f"updated: memory {memory_id} is now version 2")
    found = recall(query="favourite colour")
    assert "blue" in found and "green" not in found
    new_id = _recalled_id(found, "blue")
    assert forget(memory_id=new_id) == f"forgotten: memory {new_id}"
    assert "colour" not in recall(query="favourite colour")
    # The old version is gone from recall but kept in history, ending in a tombstone.
    chain = local_client.history(memory_id, user_id="ann")
    assert [m.version for m in chain] == [1, 2, 3] and chain[-1].deleted
    with pytest.raises(ToolFailure, match="not_found"):
        forget(memory_id=new_id)
    with pytest.raises(ToolFailure, match="forbidden"):
        update_memory(memory_id=memory_id, content="x", user_id="bob")


def test_strands_update_and_forget_failures_reach_the_model_as_errors(local_client: MemoryClient) -> None:
    from memstack.integrations.strands_tools import memstack_tools
    from strands import Agent

    model = ScriptedModel(
        [
            {"tool": "forget", "input": {"memory_id": "no-such-memory"}},
            {"tool": "update_memory", "input": {"memory_id": "no-such-memory", "content": "x"}},
            {"text": "I could not."},
        ]
    )
    agent = Agent(model=model, tools=memstack_tools(local_client, user_id="ann"), callback_handler=None)
    agent("Forget that.")
    results = [b["toolResult"] for m in agent.messages for b in m["content"] if "toolResult" in b]
    assert [r["status"] for r in results] == ["error", "error"]
    assert all("not_found" in r["content"][0]["text"] for r in results), results


def test_langchain_update_and_forget(local_client: MemoryClient) -> None:
    from memstack.integrations.langchain_tools import memstack_tools

    remember, recall, update_memory, forget = memstack_tools(local_client, user_id="ann")
    assert (update_memory.name, forget.name) == ("update_memory", "forget")
    assert update_memory.args_schema is not None
    assert set(update_memory.args_schema.model_json_schema()["required"]) == {"memory_id", "content"}
    remember.invoke({"content": "I work at Initech."})
    memory_id = _recalled_id(recall.invoke({"query": "where do I work"}), "Initech")
    updated = update_memory.invoke(
        {
            "type": "tool_call",
            "id": "c1",
            "name": "update_memory",
            "args": {"memory_id": memory_id, "content": "I work at Globex."},
        }
    )
    assert updated.tool_call_id == "c1" and updated.content.startswith(f"updated: memory {memory_id}")
    found = recall.invoke({"query": "where do I work"})
    assert "Globex" in found and "Initech" not in found
    assert forget.invoke({"memory_id": _recalled_id(found, "Globex")}).startswith("forgotten")
    assert "Globex" not in recall.invoke({"query": "where do I work"})
    # Failures are answered to the model (handle_tool_error), not raised.
    assert forget.invoke({"memory_id": memory_id}).startswith("not_found")
    assert update_memory.invoke({"memory_id": "nope", "content": "x"}).startswith("not_found")


def test_tools_of_an_agent_change_only_that_agents_memories(local_client: MemoryClient) -> None:
    from memstack.integrations.langchain_tools import memstack_tools as langchain_tools
    from memstack.integrations.strands_tools import memstack_tools as strands_tools

    travel_remember, travel_recall, *_ = strands_tools(local_client, user_id="ann", agent_id="travel")
    *_, food_update, food_forget = langchain_tools(local_client, user_id="ann", agent_id="food")
    travel_remember(content="I always book a window seat.")
    seat = _recalled_id(travel_recall(query="window seat"), "window seat")
    assert food_forget.invoke({"memory_id": seat}).startswith("forbidden")
    assert food_update.invoke({"memory_id": seat, "content": "aisle"}).startswith("forbidden")
    assert "window seat" in travel_recall(query="window seat")  # untouched
    *_, travel_forget = strands_tools(local_client, user_id="ann", agent_id="travel")
    assert travel_forget(memory_id=seat).startswith("forgotten")
