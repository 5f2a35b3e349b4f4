"""memstack for Strands Agents: ``remember``, ``recall``, ``update_memory`` and ``forget`` tools, and a
``MemoryStore`` for its MemoryManager.

::

    from strands import Agent
    from memstack.client import MemoryClient
    from memstack.integrations.strands_tools import memstack_tools

    client = MemoryClient("http://127.0.0.1:8000", api_key="dev-key")
    agent = Agent(tools=memstack_tools(client, user_id="ann"))

``MemstackMemoryStore`` plugs memstack into Strands' own ``MemoryManager``
instead: its search is memstack's retrieval pipeline, and ``add_messages``
hands whole turns to memstack, which extracts and keeps memories current on
the server (no extraction model call in the agent).
"""

from __future__ import annotations

import asyncio
from typing import Any

from strands import tool
from strands.memory.types import AddMessagesContext, MemoryEntry, MemoryStore, Metadata, SearchOptions
from strands.types.content import Message
from strands.types.tools import AgentTool

from memstack.client import calls
from memstack.client.sync import MemoryClient
from memstack.integrations.toolkit import MemoryToolkit, ToolFailure, recall_text

DEFAULT_RESULTS = 5
#: the most a recall may return (LangChain's tool and the MCP tool take the same bound)
MAX_RESULTS = 100


def memstack_tools(
    client: MemoryClient,
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
) -> list[AgentTool]:
    """``remember``, ``recall``, ``update_memory`` and ``forget`` as Strands tools acting for ``user_id``
    (or the user the model names).

    With ``agent_id``, what ``remember`` stores is this agent's, ``recall`` finds this agent's only,
    and ``update_memory`` / ``forget`` change this agent's memories only.
    """
    kit = MemoryToolkit(client, user_id=user_id, session_id=session_id, agent_id=agent_id)

    @tool
    def remember(content: str, user_id: str | None = None) -> str:
        """Remember something the user said, in their words, for future conversations.

        Args:
            content: what the user said that is worth keeping (a fact, a preference, an event)
            user_id: whose memory; leave empty when the agent serves one configured user
        """
        # A ToolFailure is raised: Strands answers the model with status "error" and its text.
        return kit.remember(content, user_id=user_id)

    @tool
    def recall(
        query: str,
        top_k: int = DEFAULT_RESULTS,
        user_id: str | None = None,
    ) -> str:
        """Recall what is known about the user that is relevant to a question, best first.

        Args:
            query: a question or topic in natural language ("what does the user eat?")
            top_k: how many memories to return (1 to 100)
            user_id: whose memory; leave empty when the agent serves one configured user
        """
        if not 1 <= top_k <= MAX_RESULTS:  # Strands' tool schemas cannot carry bounds
            raise ToolFailure(f"top_k must be between 1 and {MAX_RESULTS}, got {top_k}")
        return recall_text(kit.recall(query, user_id=user_id, top_k=top_k))

    @tool
    def update_memory(memory_id: str, content: str, user_id: str | None = None) -> str:
        """Correct a memory recall returned, when the user says it is wrong or has changed.

        Args:
            memory_id: the id of the memory, as recall shows it
            content: the corrected memory, as a full sentence
            user_id: whose memory; leave empty when the agent serves one configured user
        """
        return kit.update(memory_id, content, user_id=user_id)

    @tool
    def forget(memory_id: str, user_id: str | None = None) -> str:
        """Forget a memory recall returned, when the user asks for it to be forgotten.

        Args:
            memory_id: the id of the memory, as recall shows it
            user_id: whose memory; leave empty when the agent serves one configured user
        """
        return kit.forget(memory_id, user_id=user_id)

    return [remember, recall, update_memory, forget]


class MemstackMemoryStore(MemoryStore):
    """A Strands ``MemoryStore``: search, add, and server-side extraction from whole messages."""

    def __init__(
        self,
        client: MemoryClient,
        *,
        user_id: str,
        session_id: str | None = None,
        name: str = "memstack",
        description: str = "long-term memory of the user (facts, preferences, events), kept current",
        max_search_results: int = DEFAULT_RESULTS,
        extraction: bool = True,
    ) -> None:
        self.client = client
        self.user_id, self.session_id = user_id, session_id
        self.name, self.description = name, description
        self.max_search_results = max_search_results
        self.writable = True
        self.extraction = extraction

    async def search(self, query: str, options: SearchOptions | None = None) -> list[MemoryEntry]:
        top_k = (options or {}).get("max_search_results") or self.max_search_results
        call = calls.search(
            query, user_id=self.user_id, top_k=top_k, session_id=self.session_id, session_mode="visible"
        )
        found = await asyncio.to_thread(self.client.call, call)
        return [
            MemoryEntry(
                content=hit.content, metadata={"id": hit.id, "score": hit.score, "kind": str(hit.kind)}
            )
            for hit in found.results
        ]

    async def add(self, content: str, metadata: Metadata | None = None) -> Any:
        scalars = {k: v for k, v in (metadata or {}).items() if isinstance(v, str | int | float | bool)}
        call = calls.add(content, user_id=self.user_id, session_id=self.session_id, metadata=scalars or None)
        return await asyncio.to_thread(self.client.call, call)

    async def add_messages(self, messages: list[Message], context: AddMessagesContext | None = None) -> Any:
        turns = [
            {"role": m["role"], "content": text}
            for m in messages
            if (text := " ".join(b["text"] for b in m.get("content", []) if "text" in b).strip())
        ]
        if not turns:
            return None
        call = calls.add(turns, user_id=self.user_id, session_id=self.session_id)
        return await asyncio.to_thread(self.client.call, call)
