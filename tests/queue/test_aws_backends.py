"""The whole AWS path on moto: DynamoDB memories + DynamoDB STM + SQS, ingest → consolidation worker → LTM."""

from __future__ import annotations

from pathlib import Path

from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from memstack.adapters.dynamodb.stm import DynamoDbShortTermStore, create_stm_table
from memstack.domain.ingest import stm_memory_id
from memstack.factory import build_service
from memstack.models import MemoryFilters, Tier
from memstack.settings import load_settings
from memstack.workers.sqs import JobWorker

from tests.conformance.conftest import create_memories_table
from tests.consolidation.conftest import NOW, TURNS, conversation
from tests.queue.conftest import IDEMPOTENCY_TABLE, Aws, FakeLambdaContext, receive_all, sqs_event


def test_dynamodb_store_and_stm_with_sqs_consolidate_through_the_worker(aws: Aws, tmp_path: Path) -> None:
    create_memories_table(aws.ddb, "memstack-memories")
    create_stm_table(aws.ddb, "memstack-stm")
    settings = load_settings(
        data_dir=tmp_path / "unused",
        embedder="hashing",
        store_backend="dynamodb",
        memories_table="memstack-memories",
        stm_backend="dynamodb",
        stm_table="memstack-stm",
        queue_backend="sqs",
        extraction_queue_url=aws.urls["extract"],
        consolidation_queue_url=aws.urls["consolidate"],
        consolidation_synthesis_similarity=0.3,
    )
    svc = build_service(settings, dynamodb=aws.ddb, sqs=aws.sqs)
    try:
        assert isinstance(svc.stm, DynamoDbShortTermStore)
        messages = conversation(turns=TURNS[:5])
        svc.add("acme", "sam", messages, infer=False)
        assert svc.consolidate("acme", "sam", sync=False, now=NOW)["status"] == "queued"

        worker = JobWorker(
            svc.process_job,
            {"consolidate"},
            DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=aws.ddb),
        )
        event = sqs_event(receive_all(aws.sqs, aws.urls["consolidate"]), aws.arns["consolidate"])
        assert worker.handle(event, FakeLambdaContext()) == {"batchItemFailures": []}
        assert worker.handle(event, FakeLambdaContext()) == {"batchItemFailures": []}  # redelivered

        records, _ = svc.list("acme", "sam", MemoryFilters(tier=Tier.LTM), 100)
        summaries = [r for r in records if r.metadata.get("consolidation") == "summary"]
        assert sorted(s for r in summaries for s in r.source_ids) == sorted(m.id for m in messages)
        assert svc.stm.unconsolidated("acme", "sam", NOW) == []
        stm_records = svc.store.get_many(
            "acme", "sam", [stm_memory_id("acme", "sam", m.id) for m in messages]
        )
        assert all(r.metadata.get("consolidated") is True for r in stm_records.values())
        assert len(stm_records) == len(messages)
    finally:
        svc.close()


def test_the_worker_stores_the_users_snapshot_after_a_job_and_erase_removes_it(
    aws: Aws, tmp_path: Path
) -> None:
    import boto3
    from memstack.adapters.dynamodb import writelog
    from memstack.adapters.dynamodb.snapshot_objects import user_prefix

    create_memories_table(aws.ddb, "memstack-memories")
    create_stm_table(aws.ddb, "memstack-stm")
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="memstack-snapshots")
    settings = load_settings(
        data_dir=tmp_path / "unused",
        embedder="hashing",
        store_backend="dynamodb",
        memories_table="memstack-memories",
        snapshot_bucket="memstack-snapshots",
        snapshot_compact_writes=2,
        stm_backend="dynamodb",
        stm_table="memstack-stm",
        queue_backend="sqs",
        extraction_queue_url=aws.urls["extract"],
        consolidation_queue_url=aws.urls["consolidate"],
    )
    svc = build_service(settings, dynamodb=aws.ddb, sqs=aws.sqs, s3=s3)

    def stored() -> list[str]:
        listed = s3.list_objects_v2(Bucket="memstack-snapshots", Prefix=user_prefix("acme", "sam"))
        return [o["Key"] for o in listed.get("Contents", [])]

    try:
        for turn in TURNS[:3]:  # three writes: a snapshot is due after two
            svc.add("acme", "sam", conversation(turns=[turn]), infer=False)
        assert stored() == []  # requests never compact
        svc.consolidate("acme", "sam", sync=False, now=NOW)
        worker = JobWorker(
            svc.process_job,
            {"consolidate"},
            DynamoDBPersistenceLayer(table_name=IDEMPOTENCY_TABLE, boto3_client=aws.ddb),
        )
        event = sqs_event(receive_all(aws.sqs, aws.urls["consolidate"]), aws.arns["consolidate"])
        assert worker.handle(event, FakeLambdaContext()) == {"batchItemFailures": []}
        (key,) = stored()
        assert writelog.read_head(aws.ddb, "memstack-memories", "acme", "sam").snap_key == key
        assert svc.erase_user("acme", "sam")["snapshots"] == 1
        assert stored() == []
    finally:
        svc.close()
