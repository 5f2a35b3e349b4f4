"""Record real answers of an OpenAI-compatible server for the provider's offline tests.

    python scripts/llama_server.py --model-dir /tmp/gemma &      # prints PORT <n>
    python scripts/record_openai_responses.py http://127.0.0.1:<n>/v1

Runs the extractor and the summariser (tools mode and JSON-schema mode) against
the server and writes each request/response pair, as sent and as received, to
``tests/fixtures/openai/<name>.json``. ``tests/adapters/test_openai_provider.py``
replays them through an ``httpx.MockTransport``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from memstack.adapters.llm.providers.openai_chat import OpenAIChat
from memstack.adapters.llm.providers.structured import StructuredExtractor, StructuredSummariser
from memstack.models import MemoryRecord, Message

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "openai"
MESSAGE = Message(
    id="m2",
    speaker="Kim",
    content="I moved to Osaka last month.",
    timestamp=datetime(2024, 2, 5, 9, tzinfo=UTC),
)
TOKYO = MemoryRecord(id="mem-tokyo", tenant="t", user_id="u", content="Kim lives in Tokyo.")


class Recorder(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.pairs: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        body = response.read()
        self.pairs.append(
            {
                "request": json.loads(request.content),
                "status": response.status_code,
                "response": json.loads(body) if body else None,
            }
        )
        return httpx.Response(response.status_code, headers=response.headers, content=body)


def record(name: str, base_url: str, mode: str, run: Any) -> None:
    recorder = Recorder()
    client = httpx.Client(transport=recorder, timeout=300)
    chat = OpenAIChat(base_url, "gemma3-270m", mode=mode, client=client)  # type: ignore[arg-type]
    try:
        run(chat)
    finally:
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{name}.json").write_text(json.dumps(recorder.pairs, indent=1, ensure_ascii=False) + "\n")
        print(f"{name}: {len(recorder.pairs)} exchanges", file=sys.stderr)


def main(base_url: str) -> None:
    def extract(chat: OpenAIChat) -> None:
        print(StructuredExtractor(chat, name="openai", max_tokens=400).extract(MESSAGE, [], [TOKYO]))

    def summarise(chat: OpenAIChat) -> None:
        summariser = StructuredSummariser(chat, name="openai")
        print(summariser.summarise(["Kim: I moved to Osaka.", "Kim: I work as a nurse."], 60))
        print(summariser.synthesise(["Kim lives in Osaka.", "Kim works as a nurse."], [], 60))

    record("extract-tools", base_url, "tools", extract)
    record("extract-json-schema", base_url, "json_schema", extract)
    record("summarise-tools", base_url, "tools", summarise)


if __name__ == "__main__":
    main(sys.argv[1])
