"""Bedrock at the wire, for tests that run the real handlers: InvokeModel (Titan), Converse, Rerank.

Registered as a botocore ``before-send`` hook on a boto3 session (the way moto
fakes the services it covers), so every client the code creates for itself
is answered here: the requests are the real serialised ones, and nothing in
the code under test is patched. moto has no Converse or Rerank and answers
InvokeModel with ``{}``, so this hook is registered ahead of moto's.

Answers are deterministic and derived from the request: Titan vectors are
the hashing embedder's (same words, similar vectors), extraction ADDs the
new message's text, summaries join the turns, rerank scores word overlap.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from botocore.awsrequest import AWSResponse
from memstack.adapters.embedders.hashing import HashingEmbedder
from moto.core.botocore_stubber import MockRawResponse

_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


@dataclass
class FakeBedrock:
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (operation, model, body)

    def __call__(self, request: Any, event_name: str, **_: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        body = json.loads(request.body or b"{}")
        model = (
            unquote(request.url.split("/model/", 1)[1].split("/", 1)[0]) if "/model/" in request.url else ""
        )
        self.calls.append((operation, model, body))
        answer = getattr(self, f"_{operation.lower()}", None)
        if answer is None:
            raise AssertionError(f"the fake Bedrock has no {operation}")
        return AWSResponse(
            request.url, 200, {"Content-Type": "application/json"}, MockRawResponse(json.dumps(answer(body)))
        )

    def operations(self) -> list[str]:
        return [op for op, _, _ in self.calls]

    # ---------------------------------------------------------------- answers
    def _invokemodel(self, body: dict[str, Any]) -> dict[str, Any]:
        vector = HashingEmbedder(int(body["dimensions"])).embed([body["inputText"]])[0]
        return {
            "embedding": [float(x) for x in vector],
            "inputTextTokenCount": len(body["inputText"].split()),
        }

    def _converse(self, body: dict[str, Any]) -> dict[str, Any]:
        tool = body["toolConfig"]["toolChoice"]["tool"]["name"]
        prompt = body["messages"][-1]["content"][0]["text"]
        if tool == "record_memory_operations":
            text = json.loads(prompt)["new_message"]["text"]
            answer: dict[str, Any] = {"operations": [{"op": "ADD", "content": text, "kind": "fact"}]}
        elif tool == "record_summary":
            turns = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
            answer = {"summary": " ".join(turns)}
        elif tool == "record_memories":
            answer = {"memories": []}
        else:
            raise AssertionError(f"unexpected tool {tool}")
        return {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [{"toolUse": {"toolUseId": "tooluse-1", "name": tool, "input": answer}}],
                }
            },
            "stopReason": "tool_use",
            "usage": {"inputTokens": len(prompt.split()), "outputTokens": 20, "totalTokens": 20},
            "metrics": {"latencyMs": 1},
        }

    def _rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        query = _words(body["queries"][0]["textQuery"]["text"])
        texts = [s["inlineDocumentSource"]["textDocument"]["text"] for s in body["sources"]]
        scores = [len(query & _words(t)) / (1 + len(query)) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: -scores[i])
        return {"results": [{"index": i, "relevanceScore": scores[i]} for i in order]}


def install(session: Any, fake: FakeBedrock) -> None:
    """Answer both Bedrock runtimes on this boto3 session, ahead of any other hook (moto's)."""
    for service in ("bedrock-runtime", "bedrock-agent-runtime"):
        session._session.get_component("event_emitter").register_first(f"before-send.{service}", fake)
