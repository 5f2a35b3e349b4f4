"""What a model sees of the MCP tools: their exact schemas, and compact results (issue 26).

``search_memories`` answered about 8 KB of pretty-printed JSON for ten hits (every null,
``stages: null``, the owner's user id, source message ids, scope, microseconds), and every
tool offered a ``user_id`` argument even when the server acts for one configured user.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
from mcp.client import Client
from memstack.api.schemas import SearchResultItem
from memstack.client.sync import MemoryClient
from memstack.integrations.mcp_server import build_mcp_server
from memstack.integrations.mcp_views import hit_view, tool_result
from memstack.integrations.toolkit import MemoryToolkit
from memstack.models import BUILT_IN_CATEGORIES

from tests.integrations.mcp_scenario import TOOLS
from tests.integrations.mcp_session import ok

TOOLS_WITH_A_USER = TOOLS | {"erase_user"}
#: every field a memory in a tool result may carry (each left out when it says nothing)
MEMORY_FIELDS = {
    "id",
    "content",
    "kind",
    "category",
    "speaker",
    "event_time",
    "created_at",
    "session_id",
    "agent_id",
    "metadata",
    "expires_at",
    "version",
    "replaces_id",
    "is_current",
    "deleted",
    "conflicts_with",
}
NOT_FOR_A_MODEL = {"user_id", "stages", "source_ids", "scope", "tier", "superseded_at"}
WHEN = datetime(2026, 5, 1, 9, 30, tzinfo=UTC)


def run(server: Any, steps: Any) -> Any:
    async def scenario() -> Any:
        async with Client(server) as client:
            return await steps(client)

    return anyio.run(scenario)


def tools_of(server: Any) -> dict[str, Any]:
    async def listed(client: Client) -> Any:
        return {t.name: t for t in (await client.list_tools()).tools}

    return run(server, listed)


def call(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    async def called(client: Client) -> Any:
        return await client.call_tool(name, arguments)

    return run(server, called)


@pytest.fixture
def seeded(local_client: MemoryClient) -> Iterator[MemoryClient]:
    """Ann's memories: a keyed one with every field a model reads, and eleven raw turns about tea."""
    local_client.put_key(
        "diet",
        "Ann is vegetarian",
        user_id="ann",
        kind="preference",
        category="dietary",
        event_time=WHEN,
        metadata={"source": "onboarding"},
    )
    for n in range(11):
        local_client.add(
            f"I drank green tea number {n} with Ann's vegetarian friends.", user_id="ann", infer=False
        )
    yield local_client


def test_a_server_for_one_user_offers_no_user_argument(local_client: MemoryClient) -> None:
    server = build_mcp_server(MemoryToolkit(local_client, user_id="ann"), allow_erase=True)
    tools = tools_of(server)
    assert set(tools) == TOOLS_WITH_A_USER
    for tool in tools.values():
        assert "user_id" not in tool.input_schema["properties"], tool.name
        assert "user_id" not in tool.input_schema.get("required", []), tool.name
    assert set(tools["search_memories"].input_schema["properties"]) == {
        "query",
        "top_k",
        "session_id",
        "kind",
        "category",
        "after",
        "before",
        "agent_id",
        "metadata",
        "where",
        "min_score",
    }
    assert tools["search_memories"].input_schema["required"] == ["query"]
    assert tools["get_memory"].input_schema["required"] == ["memory_id"]
    assert set(tools["erase_user"].input_schema["properties"]) == set()


def test_a_server_for_any_user_takes_it_in_every_tool(local_client: MemoryClient) -> None:
    tools = tools_of(build_mcp_server(MemoryToolkit(local_client), allow_erase=True))
    for tool in tools.values():
        if tool.name == "job_status":  # a job is found by its id alone (and the caller's tenant)
            assert set(tool.input_schema["properties"]) == {"job_id"}
            continue
        if tool.name == "memory_categories":  # the tenant's, the same for each of its users
            assert set(tool.input_schema["properties"]) == set()
            continue
        assert "user_id" in tool.input_schema["properties"], tool.name
    assert tools["erase_user"].input_schema["required"] == ["user_id"]


def test_search_results_are_compact_with_the_fields_a_model_reads(seeded: MemoryClient) -> None:
    server = build_mcp_server(MemoryToolkit(seeded, user_id="ann"))
    schema = tools_of(server)["search_memories"].output_schema
    hit_schema = schema["$defs"]["HitView"]
    assert set(hit_schema["properties"]) == MEMORY_FIELDS | {"score", "superseded"}
    assert set(hit_schema["required"]) == {"id", "content", "kind", "created_at", "score"}

    result = call(server, "search_memories", {"query": "is Ann vegetarian", "top_k": 10})
    found = ok(result)  # the text block is the structured content, as JSON
    text = result.content[0].text
    assert "\n" not in text and ": " not in text and "null" not in text
    hits = found["results"]
    assert len(hits) == 10 and set(found) == {"results", "evidence"}
    diet = next(h for h in hits if h["content"] == "Ann is vegetarian")
    assert set(diet) == {"id", "content", "kind", "category", "event_time", "created_at", "metadata", "score"}
    assert (diet["kind"], diet["category"], diet["metadata"]) == (
        "preference",
        "dietary",
        {"source": "onboarding"},
    )
    assert diet["event_time"] == "2026-05-01T09:30:00Z"
    assert datetime.fromisoformat(diet["created_at"]).microsecond == 0
    turn = next(h for h in hits if h["content"].startswith("I drank"))
    assert set(turn) == {"id", "content", "kind", "speaker", "event_time", "created_at", "score"}
    for hit in hits:
        assert not set(hit) & NOT_FOR_A_MODEL
        assert 0 <= hit["score"] <= 1
    # What the REST answer of the same search is, pretty-printed as the tool used to return it.
    rest = seeded.search("is Ann vegetarian", user_id="ann", top_k=10)
    assert rest.evidence is not None and found["evidence"] == round(rest.evidence, 4)
    assert 0 < found["evidence"] < 1
    assert len(text) * 3 < len(rest.model_dump_json(indent=2))


def test_list_get_update_and_history_answer_compact_memories(seeded: MemoryClient) -> None:
    server = build_mcp_server(MemoryToolkit(seeded, user_id="ann"))
    page = ok(call(server, "list_memories", {"limit": 5}))
    assert set(page) == {"memories", "next_cursor"} and len(page["memories"]) == 5
    diet_id = seeded.get_key("diet", user_id="ann").id
    got = ok(call(server, "get_memory", {"memory_id": diet_id}))
    assert got == {
        "id": diet_id,
        "content": "Ann is vegetarian",
        "kind": "preference",
        "category": "dietary",
        "event_time": "2026-05-01T09:30:00Z",
        "created_at": got["created_at"],
        "metadata": {"source": "onboarding"},
        "version": 1,
    }
    new = ok(call(server, "update_memory", {"memory_id": diet_id, "content": "Ann is vegan"}))
    assert (new["version"], new["replaces_id"], new["content"]) == (2, diet_id, "Ann is vegan")
    chain = ok(call(server, "memory_history", {"memory_id": new["id"]}))["memories"]
    assert [(m["version"], m.get("is_current", True)) for m in chain] == [(1, False), (2, True)]
    for memory in [*page["memories"], got, new, *chain]:
        assert set(memory) <= MEMORY_FIELDS and not set(memory) & NOT_FOR_A_MODEL
    last = ok(call(server, "list_memories", {"limit": 200}))
    assert "next_cursor" not in last  # nothing more: the field is left out, not null


def test_the_tenants_own_categories_are_listed_and_filter_list_and_search(seeded: MemoryClient) -> None:
    server = build_mcp_server(MemoryToolkit(seeded, user_id="ann"))
    # Before the tenant has categories of its own: the 15 built-in ones, each with what it is for.
    listed = ok(call(server, "memory_categories", {}))["categories"]
    assert [c["name"] for c in listed] == list(BUILT_IN_CATEGORIES)
    assert {"name": "dietary", "description": "food and diet"} in listed
    pets = {"name": "pets", "description": "the user's pets and their care", "keywords": ["dog", "vet"]}
    seeded.patch_config({"categories": {"custom": [pets]}})
    seeded.put_key("dog", "Ann's dog Biscuit saw the vet.", user_id="ann", category="pets")
    listed = ok(call(server, "memory_categories", {}))["categories"]
    assert listed[-1] == {"name": "pets", "description": pets["description"]} and len(listed) == 16
    page = ok(call(server, "list_memories", {"category": "pets"}))["memories"]
    assert [(m["content"], m["category"]) for m in page] == [("Ann's dog Biscuit saw the vet.", "pets")]
    found = ok(call(server, "search_memories", {"query": "Biscuit the dog", "category": "pets"}))["results"]
    assert [h["category"] for h in found] == ["pets"]
    assert [
        m["category"] for m in ok(call(server, "list_memories", {"category": "dietary"}))["memories"]
    ] == ["dietary"]
    # mode replace: only the tenant's own; a built-in name is now a clear error naming the allowed ones
    seeded.patch_config({"categories": {"mode": "replace"}})
    assert ok(call(server, "memory_categories", {}))["categories"] == [
        {"name": "pets", "description": pets["description"]}
    ]
    refused = call(server, "list_memories", {"category": "dietary"})
    assert refused.is_error and "not a category of this tenant (one of pets" in refused.content[0].text


def test_failures_stay_readable_tool_errors(local_client: MemoryClient) -> None:
    server = build_mcp_server(MemoryToolkit(local_client, user_id="ann"))
    result = call(server, "get_memory", {"memory_id": "no-such-memory"})
    assert result.is_error and "not_found" in result.content[0].text
    assert json.dumps(result.model_dump(mode="json")).count("user_id") == 0


def test_a_contradicted_hit_names_its_counterpart_and_a_plain_one_says_nothing() -> None:
    base = {"content": "Ann has never been to Japan.", "kind": "fact", "tier": "ltm", "scope": "USER"}
    base |= {"user_id": "ann", "version": 1, "is_current": True, "created_at": WHEN, "score": 0.4}
    flagged = tool_result(hit_view(SearchResultItem(id="m1", conflicts_with=["m2"], **base)))
    plain = tool_result(hit_view(SearchResultItem(id="m3", **base)))
    assert flagged.structured_content["conflicts_with"] == ["m2"]
    assert "conflicts_with" not in plain.structured_content
