"""The in-process DynamoDB/S3 model the small-tier measurement runs on answers as moto does.

One scenario (writes, a supersede, a mark, searches, a compaction, a cold
container's load and catch-up, an erase) runs against moto and against the
model; every call the adapters made (operation, parameters, what came back)
and every answer the store gave must be the same. So the figures
``scripts/small_tier_limit.py`` prints come from the calls the code makes on
AWS, counted by the model.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.config import Config
from memstack.adapters.dynamodb.snapshot_objects import SnapshotObjects
from memstack.adapters.dynamodb.store import DynamoDBMemoryStore
from memstack.adapters.embedders.hashing import HashingEmbedder
from memstack.bench.aws_model import AwsModel, item_size
from memstack.domain.retrieval.config import RetrievalConfig
from memstack.domain.retrieval.pipeline import Retriever
from memstack.domain.retrieval.types import SearchRequest
from memstack.domain.vectors import coarse_prefix
from memstack.models import MemoryFilters, MemoryRecord, Tier
from moto import mock_aws

from tests.conformance.conftest import create_memories_table

TABLE, BUCKET, REGION = "memories", "snapshots", "us-east-1"
EMB = HashingEmbedder(64)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
S3_CONFIG = Config(s3={"addressing_style": "path"}, request_checksum_calculation="when_required")


def _records(n: int) -> list[MemoryRecord]:
    words = ["tea", "garden", "Lisbon", "cello", "river", "walk", "sister", "Porto", "bees", "bread"]
    out = []
    for i in range(n):
        text = f"note {i}: {words[i % 10]} and {words[(i * 3) % 10]} on day {i % 7}"
        vec = EMB.embed([text])[0]
        out.append(
            MemoryRecord(
                id=f"{i:032x}",
                tenant="t1",
                user_id="u1",
                content=text,
                tier=Tier.LTM if i % 3 else Tier.STM,
                created_at=T0 + timedelta(minutes=i),
                source_ids=[f"msg-{i}"],
                embedding_full=vec.tolist(),
                embedding_coarse=coarse_prefix(vec, 16).tolist(),
            )
        )
    return out


class Recorder:
    """Each call as (operation, parameters, a summary of the answer), with random tokens renamed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self._pending: dict[tuple[int, int], tuple[str, str]] = {}  # by (thread, operation)

    def install(self, client: Any) -> None:
        client.meta.events.register("provide-client-params", self._params)
        client.meta.events.register("after-call", self._answer)

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._pending[threading.get_ident(), id(model)] = (model.name, _canonical(params))

    def _answer(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        name, params = self._pending.pop((threading.get_ident(), id(model)))
        summary = {
            "status": http_response.status_code,
            "error": parsed.get("Error", {}).get("Code"),
            "count": parsed.get("Count"),
            "item": sorted(parsed["Item"]) if "Item" in parsed else None,
            "more": "LastEvaluatedKey" in parsed,
            "responses": {t: len(v) for t, v in parsed.get("Responses", {}).items()},
            "keys": [o["Key"] for o in parsed.get("Contents", [])],
            "range": parsed.get("ContentRange"),
        }
        self.calls.append((name, params, _canonical(summary)))

    def sequence(self) -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
        """(every call but the ranged GETs, in order; the GETs, sorted): a load's GETs run on their
        own threads, in any order and interleaved with the log reads made meanwhile."""
        gets = sorted(c for c in self.calls if c[0] == "GetObject")
        return [c for c in self.calls if c[0] != "GetObject"], gets


def _canonical(value: Any) -> str:
    def plain(v: Any) -> Any:
        if isinstance(v, bytes | bytearray):
            return f"<{len(v)} bytes {hashlib.sha256(v).hexdigest()[:12]}>"
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items() if k != "Body"}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        return v

    text = json.dumps(plain(value), sort_keys=True, default=str)
    # Random tokens (META's gen and epoch, hence object keys) and clock times differ run to run.
    text = re.sub(
        r"\b[0-9a-f]{32}\b", lambda m: "<hex>" if not m.group(0).startswith("0000") else m.group(0), text
    )
    return re.sub(r"\b\d{10}(\.\d+)?\b", "<time>", text)


def _scenario(dynamodb: Any, s3: Any) -> list[Any]:
    """What the store answers over a life of writes, searches, compactions, a cold start and an erase."""
    records = _records(80)
    config = RetrievalConfig(coarse_dim=16, vector_candidates=20, bm25_candidates=20)

    def store() -> DynamoDBMemoryStore:
        objects = SnapshotObjects(BUCKET, s3, part_bytes=8192, connections=3)
        return DynamoDBMemoryStore(TABLE, dynamodb, snapshots=objects, compact_writes=4)

    def search(s: DynamoDBMemoryStore, query: str) -> list[tuple[str, float]]:
        found = Retriever(s, EMB, config).search(
            SearchRequest(tenant="t1", user_id="u1", query=query, top_k=8)
        )
        return [(h.record.id, round(h.score, 6)) for h in found.hits]

    answers: list[Any] = []
    writer, warm = store(), store()
    for start in range(0, 40, 8):
        writer.put(records[start : start + 8])
    answers.append(search(warm, "tea in the garden"))
    writer.supersede("t1", "u1", records[3].id, records[40].model_copy(update={"replaces_id": records[3].id}))
    writer.mark("t1", "u1", [records[5].id], consolidated=True)
    answers.append(search(warm, "Lisbon river walk"))
    answers.append(writer.compact_user("t1", "u1"))
    for record in records[41:47]:
        writer.put([record])
    answers.append(search(store(), "cello lessons"))  # a cold container: the stored snapshot and the log
    answers.append(search(warm, "cello lessons"))
    answers.append(writer.compact_user("t1", "u1"))
    writer.put(records[47:60])
    answers.append(search(warm, "bees and bread"))
    answers.append(search(store(), "bees and bread"))
    answers.append(writer.list("t1", "u1", MemoryFilters(), 5)[0][-1].id)
    answers.append(writer.erase_user("t1", "u1"))
    writer.put(records[60:62])
    answers.append(search(store(), "tea"))
    return answers


def test_the_model_answers_every_call_of_the_small_tier_as_moto_does(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION, config=S3_CONFIG)
        create_memories_table(dynamodb, TABLE)
        s3.create_bucket(Bucket=BUCKET)
        on_moto = Recorder()
        on_moto.install(dynamodb)
        on_moto.install(s3)
        moto_answers = _scenario(dynamodb, s3)

    model = AwsModel()
    model.create_table(TABLE)
    model.create_bucket(BUCKET)
    dynamodb = model.install(boto3.client("dynamodb", region_name=REGION))
    s3 = model.install(boto3.client("s3", region_name=REGION, config=S3_CONFIG))
    on_model = Recorder()
    on_model.install(dynamodb)
    on_model.install(s3)
    model_answers = _scenario(dynamodb, s3)

    assert model_answers == moto_answers
    assert len(on_model.calls) > 60
    operations = {name for name, _, _ in on_model.calls}
    assert {
        "TransactWriteItems",
        "Query",
        "BatchGetItem",
        "GetObject",
        "PutObject",
        "DeleteObjects",
    } <= operations
    assert on_model.sequence() == on_moto.sequence()
    # The model's counts: every call it answered, with read units on whole items.
    reads = [c for c in model.calls if c.operation == "BatchGetItem"]
    assert reads and all(c.rru >= c.items for c in reads)


def test_read_units_count_whole_items_whatever_the_projection() -> None:
    item = {"pk": {"S": "t#u"}, "sk": {"S": "MEM#1"}, "emb": {"B": np.zeros(2048, np.float32).tobytes()}}
    assert item_size(item) == len("pk") + 3 + len("sk") + 5 + len("emb") + 8192
    model = AwsModel()
    model.create_table("t")
    client = model.install(
        boto3.client("dynamodb", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    )
    client.put_item(TableName="t", Item=item)
    client.get_item(TableName="t", Key={"pk": item["pk"], "sk": item["sk"]}, ProjectionExpression="pk")
    assert model.calls[-1].rru == 3  # 8.2 KB: three 4 KB units, though only the key came back
