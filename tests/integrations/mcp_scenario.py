"""One walk through every memstack MCP tool, shared by the stdio and the HTTP tests."""

from __future__ import annotations

from typing import Any

from mcp.client.session import ClientSession

from tests.integrations.mcp_session import failed, ok

TOOLS = {
    "add_memory",
    "search_memories",
    "list_memories",
    "get_memory",
    "update_memory",
    "delete_memory",
    "delete_memories",
    "memory_history",
    "job_status",
    "memory_categories",
}


async def check_tool_list(session: ClientSession, *, erase: bool) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS | ({"erase_user"} if erase else set())
    for tool in tools.values():
        assert tool.description and len(tool.description) > 30, tool.name
        props = tool.input_schema["properties"]
        assert "tenant" not in props, "the tenant must never be a tool argument"
        assert "ctx" not in props
        assert all(p.get("description") for p in props.values()), tool.name
        assert tool.output_schema is not None, tool.name
    assert tools["add_memory"].input_schema["required"] == ["content"]
    assert tools["search_memories"].input_schema["required"] == ["query"]
    assert tools["search_memories"].annotations.read_only_hint is True
    assert tools["delete_memory"].annotations.destructive_hint is True


async def walk_every_tool(session: ClientSession, user: dict[str, str]) -> None:
    """add → search → list → get → update → history → delete, with ``user`` ({} or {"user_id": ...})."""
    added = ok(
        await session.call_tool(
            "add_memory", {"content": "I moved to Lisbon last spring.", "wait": True, **user}
        )
    )
    assert added["status"] == "processed" and len(added["stored"]) == 1
    # The add names its extraction job; the job tool says it is done (a wait was asked for).
    [job_id] = added["job_ids"]
    job = ok(await session.call_tool("job_status", {"job_id": job_id}))
    assert (job["id"], job["status"], job["type"]) == (job_id, "done", "extract")
    assert "not found" in failed(await session.call_tool("job_status", {"job_id": "no-such-job"}))
    ok(await session.call_tool("add_memory", {"content": "I am allergic to peanuts.", "wait": True, **user}))

    found = ok(await session.call_tool("search_memories", {"query": "where does the user live", **user}))
    assert any("Lisbon" in r["content"] for r in found["results"])

    page = ok(await session.call_tool("list_memories", {"tier": "ltm", **user}))
    lisbon = next(m for m in page["memories"] if "Lisbon" in m["content"])
    assert (
        ok(await session.call_tool("get_memory", {"memory_id": lisbon["id"], **user}))["id"] == lisbon["id"]
    )

    new = ok(
        await session.call_tool(
            "update_memory", {"memory_id": lisbon["id"], "content": "The user lives in Porto now.", **user}
        )
    )
    assert new["replaces_id"] == lisbon["id"] and new["version"] == lisbon["version"] + 1
    # Relabelling alone keeps the text: a new version with the new metadata.
    labelled = ok(
        await session.call_tool(
            "update_memory", {"memory_id": new["id"], "metadata": {"place": "home"}, **user}
        )
    )
    assert labelled["content"] == new["content"] and labelled["metadata"]["place"] == "home"
    expiring = ok(
        await session.call_tool("update_memory", {"memory_id": labelled["id"], "ttl": 3600, **user})
    )
    assert expiring["expires_at"] and expiring["metadata"]["place"] == "home"
    labelled = expiring
    chain = ok(await session.call_tool("memory_history", {"memory_id": labelled["id"], **user}))["memories"]
    assert [m["id"] for m in chain][:2] == [lisbon["id"], new["id"]] and chain[-1]["id"] == labelled["id"]
    new = labelled

    gone = ok(await session.call_tool("delete_memory", {"memory_id": new["id"], **user}))
    assert gone["deleted"] is True
    after = ok(await session.call_tool("search_memories", {"query": "Porto", **user}))
    assert new["id"] not in [r["id"] for r in after["results"]]


async def check_errors(session: ClientSession, user: dict[str, str]) -> None:
    """Failures are tool results the model can read (isError + the API's code), never crashes."""
    assert "not_found" in failed(await session.call_tool("get_memory", {"memory_id": "no-such-id", **user}))
    assert "validation_error" in failed(await session.call_tool("add_memory", {"content": "   ", **user}))
    # The SDK validates arguments against the published schema before the tool runs.
    assert "top_k" in failed(await session.call_tool("search_memories", {"query": "x", "top_k": 0, **user}))
    assert "content" in failed(await session.call_tool("add_memory", {**user}))


async def check_filters(session: ClientSession, user: dict[str, str]) -> None:
    """search_memories and list_memories filter on the agent, metadata (equality, ``in``) and ``where``."""
    for content, agent, topic in [
        ("I cook risotto on Fridays.", "chef", "food"),
        ("I bake sourdough bread.", "chef", "baking"),
        ("I cycle to work.", "coach", "sport"),
    ]:
        ok(
            await session.call_tool(
                "add_memory",
                {"content": content, "agent_id": agent, "metadata": {"topic": topic}, "wait": True, **user},
            )
        )

    def topics(answer: dict[str, list[dict[str, Any]]], key: str = "results") -> set[str]:
        """The topics of what came back (the turns, or the memories extracted from them)."""
        return {m.get("metadata", {}).get("topic") for m in answer[key]}

    found = ok(
        await session.call_tool("search_memories", {"query": "cook", "metadata": {"topic": "food"}, **user})
    )
    assert topics(found) == {"food"}
    found = ok(
        await session.call_tool(
            "search_memories",
            {"query": "bread or bike", "metadata": {"topic": {"in": ["baking", "sport"]}}, **user},
        )
    )
    assert topics(found) == {"baking", "sport"}
    found = ok(await session.call_tool("search_memories", {"query": "work", "agent_id": "coach", **user}))
    assert topics(found) == {"sport"} and {r["agent_id"] for r in found["results"]} == {"coach"}
    page = ok(await session.call_tool("list_memories", {"agent_id": "chef", **user}))
    assert topics(page, "memories") == {"food", "baking"}
    page = ok(await session.call_tool("list_memories", {"metadata": {"topic": "sport"}, **user}))
    assert {m["agent_id"] for m in page["memories"]} == {"coach"}
    # where: logic and comparisons on metadata and the record's own fields
    either = {"OR": [{"agent_id": "coach"}, {"metadata.topic": {"contains": "bak"}}]}
    found = ok(await session.call_tool("search_memories", {"query": "I", "where": either, **user}))
    assert topics(found) == {"baking", "sport"}
    page = ok(await session.call_tool("list_memories", {"where": {"NOT": {"agent_id": "chef"}}, **user}))
    assert topics(page, "memories") & {"food", "baking", "sport"} == {"sport"}  # (earlier steps' have none)
    # order: the API's own (newest event first); a value it does not know fails the schema
    by_event = ok(await session.call_tool("list_memories", {"order": "event_time", "limit": 200, **user}))
    every = ok(await session.call_tool("list_memories", {"limit": 200, **user}))
    assert sorted(m["id"] for m in by_event["memories"]) == sorted(m["id"] for m in every["memories"])
    assert "order" in failed(await session.call_tool("list_memories", {"order": "oldest", **user}))
    assert "unknown field 'colour'" in failed(
        await session.call_tool("list_memories", {"where": {"colour": "red"}, **user})
    )
    # min_score (a calibrated probability): 1.0 keeps nothing a search can be sure of; the bound is checked.
    found = ok(await session.call_tool("search_memories", {"query": "cook", "min_score": 1.0, **user}))
    assert all(r["score"] >= 1.0 for r in found["results"])
    some = ok(await session.call_tool("search_memories", {"query": "cook", "min_score": 0.0, **user}))
    assert some["results"]
    assert "min_score" in failed(
        await session.call_tool("search_memories", {"query": "x", "min_score": 2, **user})
    )
    # A malformed condition is an error result the model can read.
    bad = failed(
        await session.call_tool("search_memories", {"query": "I", "metadata": {"topic": {"eq": 1}}, **user})
    )
    assert "metadata" in bad
    # Forget one agent's memories; the other agent's stay.
    gone = ok(await session.call_tool("delete_memories", {"agent_id": "chef", **user}))
    assert gone["deleted"] >= 2
    assert ok(await session.call_tool("list_memories", {"agent_id": "chef", **user}))["memories"] == []
    assert ok(await session.call_tool("list_memories", {"agent_id": "coach", **user}))["memories"]
