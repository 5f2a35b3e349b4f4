"""memstack for LangChain: ``remember`` / ``recall`` as LangChain tools (``StructuredTool``).

::

    from memstack.integrations.langchain_tools import memstack_tools

    tools = memstack_tools(MemoryClient("http://127.0.0.1:8000", api_key="dev-key"), user_id="ann")
    agent = create_react_agent(model, tools)   # or model.bind_tools(tools)

A failed call answers the model with the API's code and message (``handle_tool_error``),
so the agent can correct itself instead of crashing.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, Field

from memstack.client.sync import MemoryClient
from memstack.integrations.toolkit import MemoryToolkit, ToolFailure, recall_text


class RememberArgs(BaseModel):
    content: str = Field(
        description="what the user said that is worth keeping (a fact, a preference, an event)"
    )
    user_id: str | None = Field(None, description="whose memory; leave empty when one user is configured")


class RecallArgs(BaseModel):
    query: str = Field(description="a question or topic in natural language")
    top_k: int = Field(5, ge=1, le=100, description="how many memories to return")
    user_id: str | None = Field(None, description="whose memory; leave empty when one user is configured")


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
    ]
