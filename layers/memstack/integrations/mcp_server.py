"""memstack as a Model Context Protocol server, on the official ``mcp`` SDK (``MCPServer``).

Tools: ``add_memory``, ``search_memories``, ``list_memories``, ``get_memory``,
``update_memory``, ``delete_memory``, ``delete_memories``, ``memory_history``, ``job_status``,
and ``erase_user`` when ``MEMSTACK_MCP_ALLOW_ERASE=true``. Each has a JSON schema built from its
signature and descriptions written for the model that reads them. The tenant
is the credential of the connection (stdio: ``MEMSTACK_DEFAULT_TENANT``; HTTP:
the caller's API key, checked as the REST API checks it), never an argument.

Served two ways: ``memstack mcp`` (stdio, for desktop hosts) and ``/mcp`` on
``memstack serve`` (streamable HTTP, ``memstack.integrations.mcp_http``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime
from functools import wraps
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from memstack import __version__
from memstack.api.schemas import (
    AddMemoriesResponse,
    DeleteMemoriesResponse,
    DeleteMemoryResponse,
    EraseUserResponse,
    JobStatusResponse,
    MetadataIn,
)
from memstack.client import calls
from memstack.client.in_process import credentials_of
from memstack.integrations.mcp_views import (
    CategoriesView,
    HistoryView,
    MemoryPage,
    MemoryView,
    SearchView,
    categories_view,
    memory_view,
    search_view,
    tool_result,
)
from memstack.integrations.toolkit import MemoryToolkit, ToolFailure
from memstack.logs import keep_out_of_root_handlers
from memstack.models import CATEGORY_PATTERN, Kind, ListOrder, Tier

P = ParamSpec("P")
T = TypeVar("T")

INSTRUCTIONS = """\
memstack is the user's long-term memory. Before answering something that depends on
what the user told you before (preferences, facts about their life, past events), call
search_memories. When the user tells you something worth keeping, call add_memory with
their words. Memories are versioned: update_memory writes a new version and
memory_history shows how a memory changed. Two results that name each other in
conflicts_with contradict each other and nothing said which is right: ask the user."""

UserArg = Annotated[
    str | None,
    Field(description="whose memories; leave empty when the server is configured for one user"),
]
SessionArg = Annotated[
    str | None, Field(description="the conversation session; CONTEXT-scoped memories are seen only in it")
]
CategoryArg = Annotated[
    str | None,
    Field(
        max_length=40,
        pattern=CATEGORY_PATTERN,
        description="only memories in this category (memory_categories lists this deployment's)",
    ),
]
MemoryIdArg = Annotated[
    str, Field(description="a memory id, as returned by search_memories or list_memories")
]
MetadataArg = Annotated[
    dict[str, str | int | float | bool] | None,
    Field(description="labels stored with the memory and usable as search filters"),
]
AgentFilterArg = Annotated[
    str | None, Field(description="only memories from conversations with this agent (its agent_id)")
]
MetadataFilterArg = Annotated[
    dict[str, str | int | float | bool | MetadataIn] | None,
    Field(
        description='only memories whose labels hold these values: {"topic": "food"}, or '
        '{"topic": {"in": ["food", "travel"]}} for any of several; every label must match'
    ),
]
WhereArg = Annotated[
    dict[str, Any] | None,
    Field(
        description='a filter with logic and comparisons: {"AND": [...]}, {"OR": [...]}, {"NOT": {...}}, '
        "or {field: condition} with field created_at, event_time, category, kind, agent_id or "
        "metadata.<label>, and condition a value or {op: value}, op one of eq, ne, gt, gte, lt, lte, in, "
        'nin, contains. Example: {"OR": [{"category": "travel"}, {"metadata.priority": {"gte": 3}}]}'
    ),
]

# The session of an agent's tools is the conversation it is in: it sees the user's memories
# from every session plus this session's CONTEXT ones, not this session's alone.
VISIBLE = "visible"

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ADDITIVE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def tool_errors(fn: Callable[P, T]) -> Callable[P, T]:
    """A ``ToolFailure`` becomes the SDK's ``ToolError``: an ``isError`` result the model reads."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return fn(*args, **kwargs)
        except ToolFailure as exc:
            raise ToolError(str(exc)) from exc

    return wrapper


def without_user_argument(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` as a tool without a ``user_id`` argument: the server acts for its configured user.

    The SDK builds a tool's schema from its signature; a model never sees (or guesses at) an
    argument that can only hold one value.
    """
    signature = inspect.signature(fn, eval_str=True)
    if "user_id" not in signature.parameters:
        return fn

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs, user_id=None)  # None: the configured user (MemoryToolkit.user)

    wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p for p in signature.parameters.values() if p.name != "user_id"]
    )
    return wrapper


def build_mcp_server(toolkit: MemoryToolkit, *, allow_erase: bool = False) -> MCPServer[Any]:
    """An ``MCPServer`` whose tools act through ``toolkit`` (and the caller's credential, over HTTP)."""
    server: MCPServer[Any] = MCPServer(
        "memstack",
        title="memstack memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )
    keep_out_of_root_handlers()  # the SDK just put its handler on the root logger
    kit = toolkit
    # One user configured: no tool takes a user_id.
    for_user: Callable[[Callable[..., Any]], Callable[..., Any]] = (
        without_user_argument if kit.user_id else (lambda fn: fn)
    )

    def headers(ctx: Context[Any, Any]) -> dict[str, str]:
        """Over HTTP, the caller's credential (its tenant); over stdio, none (the process's tenant)."""
        try:
            return credentials_of(ctx.headers)
        except ValueError:  # no request (a direct call outside a session)
            return {}

    @server.tool(annotations=ADDITIVE)
    @for_user
    @tool_errors
    def add_memory(
        content: Annotated[str, Field(description="what was said, in the speaker's own words")],
        ctx: Context[Any, Any],
        role: Annotated[
            Literal["user", "assistant"], Field(description="who said it (default: the user)")
        ] = "user",
        user_id: UserArg = None,
        session_id: SessionArg = None,
        agent_id: Annotated[
            str | None, Field(description="the agent taking part (leave empty when one is configured)")
        ] = None,
        metadata: MetadataArg = None,
        wait: Annotated[
            bool, Field(description="true waits until facts have been extracted (slower)")
        ] = False,
        ttl: Annotated[
            int | None,
            Field(ge=1, description="seconds until this is forgotten (empty: kept until deleted)"),
        ] = None,
    ) -> Annotated[CallToolResult, AddMemoriesResponse]:
        """Remember something said in the conversation. memstack stores the turn at once and
        extracts facts, events and preferences from it, updating what it already knew."""
        call = calls.add(
            [{"role": role, "content": content}],
            user_id=kit.user(user_id),
            session_id=session_id or kit.session_id,
            agent_id=kit.agent(agent_id),
            metadata=metadata,
            sync=wait or None,
            ttl=ttl,
        )
        return tool_result(kit.run(call, headers(ctx)))

    @server.tool(annotations=READ_ONLY)
    @for_user
    @tool_errors
    def search_memories(
        query: Annotated[str, Field(description="a question or topic, in natural language")],
        ctx: Context[Any, Any],
        user_id: UserArg = None,
        top_k: Annotated[int, Field(ge=1, le=100, description="how many memories to return")] = 10,
        session_id: SessionArg = None,
        kind: Annotated[Kind | None, Field(description="only facts, events or preferences")] = None,
        category: CategoryArg = None,
        after: Annotated[
            datetime | None, Field(description="only memories of events after this time")
        ] = None,
        before: Annotated[datetime | None, Field(description="only memories of events before this")] = None,
        agent_id: AgentFilterArg = None,
        metadata: MetadataFilterArg = None,
        where: WhereArg = None,
        min_score: Annotated[
            float | None,
            Field(
                ge=0.0,
                le=1.0,
                description="only results at least this likely to be relevant (a calibrated 0-1 score). "
                "Measured on two benchmarks, a best result that answers the question scored 0.2 or more "
                "83-98% of the time but 0.5 or more only 48-71%: use 0.1-0.2 to cut noise, not 0.5; "
                "a low best score does not mean memstack knows nothing (docs/retrieval.md)",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, SearchView]:
        """Find what memstack knows that is relevant to a query, best first (hybrid keyword +
        semantic search with time awareness: 'what did I do last week' works). The answer's
        evidence (0-1) says how likely memstack holds anything on the query at all: below about
        0.7, say you don't know or ask instead of answering from the results (measured on two
        benchmarks, that catches about a quarter of the questions the memories cannot answer and
        6-9% of those they can; a result's score cannot tell these apart)."""
        filters = {"kind": kind, "category": category, "after": after, "before": before}
        call = calls.search(
            query,
            user_id=kit.user(user_id),
            top_k=top_k,
            session_id=session_id or kit.session_id,
            session_mode=VISIBLE,
            agent_id=kit.agent(agent_id),
            filters={k: v for k, v in filters.items() if v is not None} or None,
            metadata=metadata,
            where=where,
            min_score=min_score,
        )
        return tool_result(search_view(kit.run(call, headers(ctx))))

    @server.tool(annotations=READ_ONLY)
    @for_user
    @tool_errors
    def list_memories(
        ctx: Context[Any, Any],
        user_id: UserArg = None,
        limit: Annotated[int, Field(ge=1, le=200, description="page size")] = 20,
        cursor: Annotated[str | None, Field(description="next_cursor of the previous page")] = None,
        tier: Annotated[
            Tier | None, Field(description="ltm: distilled memories; stm: raw recent turns")
        ] = None,
        kind: Annotated[Kind | None, Field(description="only facts, events or preferences")] = None,
        category: CategoryArg = None,
        session_id: SessionArg = None,
        agent_id: AgentFilterArg = None,
        metadata: MetadataFilterArg = None,
        where: WhereArg = None,
        order: Annotated[
            ListOrder,
            Field(description="created_at: newest written first; event_time: newest event first"),
        ] = "created_at",
    ) -> Annotated[CallToolResult, MemoryPage]:
        """List the user's current memories, newest first, one page at a time."""
        call = calls.list_memories(
            user_id=kit.user(user_id),
            limit=limit,
            cursor=cursor,
            tier=tier,
            kind=kind,
            category=category,
            session_id=session_id or kit.session_id,
            session_mode=VISIBLE,
            agent_id=kit.agent(agent_id),
            metadata=metadata,
            where=where,
            order=order,
        )
        page = kit.run(call, headers(ctx))
        view = MemoryPage(memories=[memory_view(m) for m in page.memories], next_cursor=page.next_cursor)
        return tool_result(view)

    @server.tool(annotations=READ_ONLY)
    @for_user
    @tool_errors
    def get_memory(
        memory_id: MemoryIdArg, ctx: Context[Any, Any], user_id: UserArg = None
    ) -> Annotated[CallToolResult, MemoryView]:
        """Read one memory (any version) by its id."""
        memory = kit.run(calls.get(memory_id, user_id=kit.user(user_id)), headers(ctx))
        return tool_result(memory_view(memory))

    @server.tool(annotations=DESTRUCTIVE)
    @for_user
    @tool_errors
    def update_memory(
        memory_id: MemoryIdArg,
        ctx: Context[Any, Any],
        content: Annotated[
            str | None, Field(description="the corrected memory, as a full sentence (empty: keep the text)")
        ] = None,
        metadata: Annotated[
            dict[str, str | int | float | bool] | None,
            Field(description="new labels, replacing the memory's labels (empty: keep them)"),
        ] = None,
        ttl: Annotated[
            int | None, Field(ge=1, description="seconds from now until the memory is forgotten")
        ] = None,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, MemoryView]:
        """Correct a memory or relabel it. memstack writes a new version; the old one stays in its history."""
        call = calls.update(memory_id, content, user_id=kit.user(user_id), metadata=metadata, ttl=ttl)
        return tool_result(memory_view(kit.run(call, headers(ctx))))

    @server.tool(annotations=DESTRUCTIVE)
    @for_user
    @tool_errors
    def delete_memory(
        memory_id: MemoryIdArg, ctx: Context[Any, Any], user_id: UserArg = None
    ) -> Annotated[CallToolResult, DeleteMemoryResponse]:
        """Forget one memory (it stops appearing in search; its history keeps a tombstone)."""
        return tool_result(kit.run(calls.delete(memory_id, user_id=kit.user(user_id)), headers(ctx)))

    @server.tool(annotations=DESTRUCTIVE)
    @for_user
    @tool_errors
    def delete_memories(
        ctx: Context[Any, Any],
        agent_id: Annotated[str | None, Field(description="forget what came from this agent")] = None,
        session_id: Annotated[str | None, Field(description="forget what came from this session")] = None,
        user_id: UserArg = None,
    ) -> Annotated[CallToolResult, DeleteMemoriesResponse]:
        """Forget every memory from one agent and/or one session (each keeps a tombstone in its history)."""
        call = calls.delete_all(
            user_id=kit.user(user_id), agent_id=kit.agent(agent_id), session_id=session_id
        )
        return tool_result(kit.run(call, headers(ctx)))

    @server.tool(annotations=READ_ONLY)
    @for_user
    @tool_errors
    def memory_history(
        memory_id: MemoryIdArg, ctx: Context[Any, Any], user_id: UserArg = None
    ) -> Annotated[CallToolResult, HistoryView]:
        """How a memory changed over time: its versions, oldest first."""
        chain = kit.run(calls.history(memory_id, user_id=kit.user(user_id)), headers(ctx))
        return tool_result(HistoryView(memories=[memory_view(m) for m in chain]))

    @server.tool(annotations=READ_ONLY)
    @tool_errors
    def job_status(
        job_id: Annotated[str, Field(description="one of the job_ids add_memory returned")],
        ctx: Context[Any, Any],
    ) -> Annotated[CallToolResult, JobStatusResponse]:
        """Whether memstack has finished extracting facts from what add_memory stored: the job is
        queued, running, done, or failed (with the reason)."""
        return tool_result(kit.run(calls.job(job_id), headers(ctx)))

    @server.tool(annotations=READ_ONLY)
    @tool_errors
    def memory_categories(ctx: Context[Any, Any]) -> Annotated[CallToolResult, CategoriesView]:
        """The categories memories are filed under here, each with what belongs in it: the names
        search_memories and list_memories take as category (a deployment may have its own)."""
        return tool_result(categories_view(kit.run(calls.get_config(), headers(ctx)).config))

    if allow_erase:

        @server.tool(annotations=DESTRUCTIVE)
        @for_user
        @tool_errors
        def erase_user(
            user_id: Annotated[str, Field(description="the user whose every memory is erased")],
            ctx: Context[Any, Any],
        ) -> Annotated[CallToolResult, EraseUserResponse]:
            """Erase everything memstack stores about a user. Irreversible: only when the user asks."""
            return tool_result(kit.run(calls.erase_user(kit.user(user_id)), headers(ctx)))

    return server
