"""The extraction worker counts every decided operation as ExtractionOperations{operation=...}."""

from __future__ import annotations

import json

import pytest
from memstack.models import Message
from memstack.service import MemoryService
from memstack.workers.lambda_entry import emit_extraction_operations


def test_operations_are_emitted_one_metric_per_operation(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstack.workers import lambda_entry

    # In Lambda this is POWERTOOLS_SERVICE_NAME, which the stack sets per function.
    monkeypatch.setattr(lambda_entry.metrics, "service", "memstack-extraction")
    emit_extraction_operations(["ADD", "ADD", "NONE"])
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    counts = {b["operation"]: b["ExtractionOperations"] for b in blobs}
    assert counts == {"ADD": 2.0, "NONE": 1.0} or counts == {"ADD": [2.0], "NONE": [1.0]}
    for blob in blobs:
        directive = blob["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == "memstack"
        assert blob["service"] == "memstack-extraction"
        assert ["operation", "service"] in [sorted(d) for d in directive["Dimensions"]]


def test_the_extraction_handler_reports_what_it_decided(service: MemoryService) -> None:
    seen: list[list[str]] = []
    handler = service.job_handlers["extract"]
    handler.on_operations = seen.append  # type: ignore[attr-defined]
    service.add("t", "u", [Message(id="m1", speaker="Ann", content="I live in Tokyo.")], sync=True)
    service.add("t", "u", [Message(id="m2", speaker="Ann", content="I moved to Osaka.")], sync=True)
    assert seen[0] == ["ADD"] and "UPDATE" in seen[1]
