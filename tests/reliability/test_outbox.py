"""Enqueue that cannot be lost (issue 12, item 5): the STM entry is the extraction outbox.

A message stored by a request that then failed (queue down, index down, a
DynamoDB batch half written, a write that timed out after it landed) is
re-enqueued by the client's retry, because its STM entry still says an
extraction is owed. Jobs are named after the entry, so sending one twice runs
it once.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore
from memstack.domain.ingest import extraction_job
from memstack.errors import Conflict, DependencyFailed
from memstack.models import MemoryFilters, Message, Tier
from memstack.service import MemoryService

from tests.api.conftest import build_api
from tests.consolidation.test_dynamodb_stm import TABLE as STM_TABLE
from tests.reliability.conftest import ServiceFactory
from tests.reliability.faults import Fail, Faulty, server_error

T, U = "acme", "ann"


def add_body(*ids: str, sync: bool = False) -> dict[str, Any]:
    return {
        "user_id": U,
        "sync": sync,
        "messages": [{"id": i, "role": "user", "content": f"I adopted a cat named Miso{i}."} for i in ids],
    }


def ltm(service: MemoryService, user: str = U) -> list[Any]:
    records, _ = service.list(T, user, MemoryFilters(tier=Tier.LTM, include_superseded=True), 1000)
    return records


def owed(service: MemoryService, ids: list[str]) -> dict[str, Any]:
    return service.stm.unextracted(T, U, ids)


def test_enqueue_failure_is_503_and_the_retry_enqueues_it(faulty_service: ServiceFactory) -> None:
    service = faulty_service(queue_faults={"send": Fail(DependencyFailed("SQS is down"))})
    api = build_api(service, service.settings)
    status, body = api("POST", "/v1/memories", body=add_body("m1"))
    assert status == 503 and body["error"]["code"] == "dependency_failed"
    assert list(owed(service, ["m1"])) == ["m1"]  # stored, extraction still owed
    status, body = api("POST", "/v1/memories", body=add_body("m1", sync=True))
    assert status == 200, body
    assert body["stored"] == [] and body["queued"] == 1 and body["status"] == "processed"
    assert [r.source_ids for r in ltm(service)] == [["m1"]]
    assert owed(service, ["m1"]) == {}
    # A third send of the same message owes nothing any more.
    status, body = api("POST", "/v1/memories", body=add_body("m1"))
    assert status == 202 and body["queued"] == 0


def test_index_failure_after_the_stm_write_then_retry(faulty_service: ServiceFactory) -> None:
    service = faulty_service(store_faults={"put": Fail(DependencyFailed("index is down"))})
    with pytest.raises(DependencyFailed):
        service.add(T, U, [Message(id="m1", content="I live in Lisbon.")])
    # On the embedded backend the add's STM entry and its index write are one unit: the failed add
    # left nothing (no turn, nothing owed), so the retry stores the message as new and extracts it.
    assert owed(service, ["m1"]) == {}
    result = service.add(T, U, [Message(id="m1", content="I live in Lisbon.")], sync=True)
    assert result.stored == ["m1"] and result.queued == 1 and result.processed
    stm_turns, _ = service.list(T, U, MemoryFilters(tier=Tier.STM), 10)
    assert [r.source_ids for r in stm_turns] == [["m1"]]
    assert len(ltm(service)) == 1


def test_a_write_that_landed_but_answered_conflict_is_success(faulty_service: ServiceFactory) -> None:
    """OpenSearch: a create that timed out after it succeeded is retried by the client and answers 409."""
    service = faulty_service(store_faults={"put": Fail(Conflict("memory stm_x already exists"), after=True)})
    result = service.add(T, U, [Message(id="m1", content="I live in Lisbon.")], sync=True)
    assert result.stored == ["m1"] and result.processed
    assert service.store.injected["put"] == 1
    turns, _ = service.list(T, U, MemoryFilters(tier=Tier.STM), 10)
    assert [r.source_ids for r in turns] == [["m1"]] and len(ltm(service)) == 1


def test_a_job_delivered_twice_extracts_once(faulty_service: ServiceFactory) -> None:
    service = faulty_service()
    calls: list[str] = []
    handler = service.job_handlers["extract"]
    real = handler.extractor

    class Counting:
        name = "counting"

        def extract(self, message: Message, context: list, neighbours: list, guidance: Any = None) -> list:
            calls.append(message.id)
            return real.extract(message, context, neighbours)

    handler.extractor = Counting()
    result = service.add(T, U, [Message(id="m1", content="I moved to Osaka.")], sync=True)
    # The job is done and gone; SQS may still deliver it again (at-least-once).
    entry = service.stm.get(T, U, "m1")
    assert entry is not None and entry.extraction == "done"
    redelivered = extraction_job(T, U, "m1", entry.received_at)
    assert redelivered.id == result.job_ids[0]
    service.process_job(redelivered)
    assert calls == ["m1"]
    assert len(ltm(service)) == 1


def test_the_same_message_after_an_erase_is_a_new_job(faulty_service: ServiceFactory) -> None:
    service = faulty_service()
    first = service.add(T, U, [Message(id="m1", content="I moved to Osaka.")], sync=True)
    service.erase_user(T, U)
    second = service.add(T, U, [Message(id="m1", content="I moved to Osaka.")], sync=True)
    assert second.stored == ["m1"] and second.processed
    assert first.job_ids != second.job_ids
    assert len(ltm(service)) == 1


# --------------------------------------------------------------- DynamoDB STM
def test_dynamodb_batch_half_written_is_taken_back_and_the_retry_stores_it_all(
    faulty_service: ServiceFactory, ddb: Any, tmp_path: Path
) -> None:
    """60 messages are two transactions (44 + 16); the second fails: the first is withdrawn (issue 25),
    and the retry stores and queues all 60, each extracted once."""
    flaky = Faulty(ddb, transact_write_items=Fail(server_error("TransactWriteItems"), on_call=2))
    service = faulty_service(stm=DynamoDbShortTermStore(STM_TABLE, client=flaky))
    messages = [Message(id=f"m{i}", content=f"My friend number {i} is called Name{i}.") for i in range(60)]
    with pytest.raises(DependencyFailed, match="retry"):
        service.add(T, U, messages)
    ids = [m.id for m in messages]
    assert service.stm.unextracted(T, U, ids) == {}  # the first transaction taken back: nothing owed
    result = service.add(T, U, messages, sync=True)
    assert sorted(result.stored) == sorted(ids) and result.queued == 60 and result.processed
    assert service.stm.unextracted(T, U, ids) == {}
    sources = Counter(s for r in ltm(service) for s in r.source_ids)
    assert set(sources) == set(ids) and max(sources.values()) == 1  # every one extracted, none twice


def test_dynamodb_transaction_skips_what_is_stored_and_keeps_the_rest(ddb: Any) -> None:
    from memstack.ports.stm import StmEntry

    stm = DynamoDbShortTermStore(STM_TABLE, client=ddb)

    def entries(*ids: str) -> list[StmEntry]:
        from datetime import UTC, datetime

        now = datetime.now(UTC)
        return [
            StmEntry(
                tenant=T,
                user_id=U,
                message=Message(id=i, content=f"turn {i}"),
                received_at=now,
                expires_at=int(now.timestamp()) + 3600,
                extraction="pending",
            )
            for i in ids
        ]

    assert stm.append(entries("a", "b")) == ["a", "b"]
    assert stm.append(entries("b", "c", "a", "d", "c")) == ["c", "d"]
    assert sorted(stm.unextracted(T, U, ["a", "b", "c", "d", "x"])) == ["a", "b", "c", "d"]
    assert stm.mark_extracted(T, U, ["a", "x"]) == 1 and stm.mark_extracted(T, U, ["a"]) == 0
    assert sorted(stm.unextracted(T, U, ["a", "b", "c", "d"])) == ["b", "c", "d"]
    assert stm.get(T, U, "a").extraction == "done" and stm.get(T, U, "b").extraction == "pending"
    assert stm.erase_user(T, U) == 4
