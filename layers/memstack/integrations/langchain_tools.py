"""memstack for LangChain: ``remember``, ``recall``, ``update_memory`` and ``forget`` as LangChain tools.

::

    from memstack.integrations.langchain_tools import memstack_tools

    tools = memstack_tools(MemoryClient("http://127.0.0.1:8000", api_key="dev-key"), user_id="ann")
    agent = create_react_agent(model, tools)   # or model.bind_tools(tools)

A failed call answers the model with the API's code and message (``handle_tool_error``),
so the agent can correct itself instead of crashing.
"""

from __future__ import annotations

from typing import Annotated

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from memstack.client.sync import MemoryClient
from memstack.integrations.toolkit import MemoryToolkit, ToolFailure, recall_text

UserArg = Annotated[str | None, Field(description="whose memory; leave empty when one user is configured")]
MemoryIdArg = Annotated[str, Field(description="the id of a memory, as recall shows it")]


class RememberArgs(BaseModel):
    content: str = Field(
        description="what the user said that is worth keeping (a fact, a preference, an event)"
    )
    user_id: UserArg = None


class RecallArgs(BaseModel):
    query: str = Field(description="a question or topic in natural language")
    top_k: int = Field(5, ge=1, le=100, description="how many memories to return")
    user_id: UserArg = None


class UpdateArgs(BaseModel):
    memory_id: MemoryIdArg
    content: str = Field(description="the corrected memory, as a full sentence")
    user_id: UserArg = None


class ForgetArgs(BaseModel):
    memory_id: MemoryIdArg
    user_id: UserArg = None


def memstack_tools(
    client: MemoryClient,
    *,
    user_id: str | None = None,
    session_id: str | None = None,
    agent_id: str | None = None,
) -> list[BaseTool]:
    kit = MemoryToolkit(client, user_id=user_id, session_id=session_id, agent_id=agent_id)

    def remember(content: str, user_id: str | None = None) -> str:
        try:
            return kit.remember(content, user_id=user_id)
        except ToolFailure as exc:
            raise ToolException(str(exc)) from exc

    def recall(query: str, top_k: int = 5, user_id: str | None = None) -> str:
        try:
            return recall_text(kit.recall(query, user_id=user_id, top_k=top_k))
        except ToolFailure as exc:
            raise ToolException(str(exc)) from exc

    def update_memory(memory_id: str, content: str, user_id: str | None = None) -> str:
        try:
            return kit.update(memory_id, content, user_id=user_id)
        except ToolFailure as exc:
            raise ToolException(str(exc)) from exc

    def forget(memory_id: str, user_id: str | None = None) -> str:
        try:
            return kit.forget(memory_id, user_id=user_id)
        except ToolFailure as exc:
            raise ToolException(str(exc)) from exc

    return [
        StructuredTool.from_function(
            remember,
            name="remember",
            description="Remember something the user said, in their words, for future conversations.",
            args_schema=RememberArgs,
            handle_tool_error=True,
        ),
        StructuredTool.from_function(
            recall,
            name="recall",
            description="Recall what is known about the user that is relevant to a question, best first.",
            args_schema=RecallArgs,
            handle_tool_error=True,
        ),
        StructuredTool.from_function(
            update_memory,
            name="update_memory",
            description="Correct a memory recall returned (by its id) when the user says it is wrong or "
            "has changed; the old version stays in its history.",
            args_schema=UpdateArgs,
            handle_tool_error=True,
        ),
        StructuredTool.from_function(
            forget,
            name="forget",
            description="Forget a memory recall returned (by its id), when the user asks to forget it.",
            args_schema=ForgetArgs,
            handle_tool_error=True,
        ),
    ]
