"""What an agent's memory tools do, once, for every framework (MCP, Strands, LangChain).

A ``MemoryToolkit`` holds a ``MemoryClient`` and who the memories belong to.
The tenant is the client's credential and is never a tool argument; the user
comes from configuration (``user_id=``) or, when none is configured, from the
tool call. A failed call becomes a ``ToolFailure`` whose message a model can
read and act on ("not_found: ..."), never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from memstack.api.schemas import SearchResultItem
from memstack.client import calls
from memstack.client.calls import ApiCall
from memstack.client.errors import MemoryApiError
from memstack.client.sync import MemoryClient

T = TypeVar("T")


class ToolFailure(Exception):
    """A tool call that could not be done; the message is for the model."""


@dataclass
class MemoryToolkit:
    client: MemoryClient
    user_id: str | None = None
    session_id: str | None = None
    #: tags what the tools add, and keeps recall to this agent's memories (None: every agent's)
    agent_id: str | None = None

    def user(self, given: str | None) -> str:
        """The user of a call: the configured one, or the one the call names."""
        if self.user_id and given and given != self.user_id:
            raise ToolFailure(f"forbidden: these tools act for user {self.user_id!r} only")
        user = self.user_id or given
        if not user:
            raise ToolFailure("user_id is required (no user is configured for these tools)")
        return user

    def agent(self, given: str | None) -> str | None:
        """The agent a read is filtered on: the one asked for, else the configured one (if any)."""
        if self.agent_id and given and given != self.agent_id:
            raise ToolFailure(f"forbidden: these tools act for agent {self.agent_id!r} only")
        return given or self.agent_id

    def run(self, call: ApiCall[T], headers: Mapping[str, str] | None = None) -> T:
        """Send ``call`` (with the caller's credential ``headers``, if any) and map failures."""
        if headers:
            call = replace(call, headers={**(call.headers or {}), **headers})
        try:
            return self.client.call(call)
        except MemoryApiError as exc:
            raise ToolFailure(f"{exc.code}: {exc.message}") from exc

    # ----------------------------------------------------- remember / recall
    def remember(
        self,
        content: str,
        *,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """Store one thing the user said; extraction into long-term memory follows."""
        answer = self.run(
            calls.add(
                content,
                user_id=self.user(user_id),
                session_id=self.session_id,
                agent_id=self.agent_id,
                metadata=metadata,
            ),
            headers,
        )
        return f"remembered ({answer.status}, {len(answer.stored)} new message(s))"

    def recall(
        self,
        query: str,
        *,
        user_id: str | None = None,
        top_k: int = 5,
        headers: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """The memories most relevant to ``query``, best first, in a compact form for a model."""
        answer = self.run(
            calls.search(
                query,
                user_id=self.user(user_id),
                top_k=top_k,
                session_id=self.session_id,
                session_mode="visible",  # the conversation's view: every session's USER memories too
                agent_id=self.agent_id,
            ),
            headers,
        )
        return [recalled(hit) for hit in answer.results]

    # ----------------------------------------------------- update / forget
    def _own(self, memory_id: str, user: str, headers: Mapping[str, str] | None) -> None:
        """With an agent configured, only that agent's memories may be changed (recall shows only those)."""
        if self.agent_id is None:
            return
        memory = self.run(calls.get(memory_id, user_id=user), headers)
        if memory.agent_id != self.agent_id:
            raise ToolFailure(
                f"forbidden: memory {memory_id} is not from agent {self.agent_id!r}"
                " (these tools change only that agent's memories)"
            )

    def update(
        self,
        memory_id: str,
        content: str,
        *,
        user_id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """Correct a memory: a new version (with a new id); the old one stays in its history."""
        user = self.user(user_id)
        self._own(memory_id, user, headers)
        memory = self.run(calls.update(memory_id, content, user_id=user), headers)
        return f"updated: memory {memory_id} is now version {memory.version} (id {memory.id})"

    def forget(
        self, memory_id: str, *, user_id: str | None = None, headers: Mapping[str, str] | None = None
    ) -> str:
        """Delete a memory: it is no longer recalled (its history keeps a tombstone)."""
        user = self.user(user_id)
        self._own(memory_id, user, headers)
        self.run(calls.delete(memory_id, user_id=user), headers)
        return f"forgotten: memory {memory_id}"


def recalled(hit: SearchResultItem) -> dict[str, Any]:
    """One search hit as a model needs it: what, when (the time it was said), how sure."""
    when = hit.event_time or hit.created_at
    return {
        "id": hit.id,
        "memory": hit.content,
        "when": when.date().isoformat(),
        "kind": str(hit.kind),
        "score": round(hit.score, 4),
    }


def recall_text(memories: list[dict[str, Any]]) -> str:
    """The recalled memories as lines of text (for frameworks whose tools answer in text)."""
    if not memories:
        return "no relevant memories"
    return "\n".join(f"- [{m['when']}] {m['memory']} (id {m['id']})" for m in memories)
