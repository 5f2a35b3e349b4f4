"""``Idempotency-Key``: a retried add creates nothing twice, in SQLite locally and DynamoDB in AWS."""

from __future__ import annotations

import time
from collections.abc import Iterator

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyItemAlreadyExistsError
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from memstack.adapters.embedded.database import Database
from memstack.api.app import close_app, create_app
from memstack.api.auth import ApiKeyAuthenticator
from memstack.api.idempotency import SqlitePersistenceLayer, build_persistence
from memstack.service import MemoryService
from memstack.settings import Settings
from moto import mock_aws

from tests.api.conftest import KEYS, Api

# Messages without ids: each attempt would get fresh ids, so only the key prevents duplicates.
BODY = {
    "user_id": "alice",
    "infer": False,
    "messages": [{"role": "user", "content": "I bought a red bicycle."}],
}


def _count(api: Api, key: str = "acme-key") -> int:
    return len(api("GET", "/v1/memories", key=key, query={"user_id": "alice"})[1]["memories"])


def test_retry_with_the_same_key_replays_the_first_answer(api: Api) -> None:
    first = api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "req-1"})
    second = api("POST", "/v1/memories", body=BODY, headers={"idempotency-key": "req-1"})
    assert first[0] == second[0] == 202
    assert first[1] == second[1]
    assert _count(api) == 1


def test_without_a_key_each_request_stores_again(api: Api) -> None:
    api("POST", "/v1/memories", body=BODY)
    api("POST", "/v1/memories", body=BODY)
    assert _count(api) == 2


def test_a_new_key_is_a_new_request(api: Api) -> None:
    api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "req-1"})
    api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "req-2"})
    assert _count(api) == 2


def test_reusing_a_key_with_another_body_is_an_error_that_stores_nothing(api: Api) -> None:
    api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "req-1"})
    other = {**BODY, "messages": [{"role": "user", "content": "Something else entirely."}]}
    status, body = api("POST", "/v1/memories", body=other, headers={"Idempotency-Key": "req-1"})
    assert status == 422 and body["error"]["code"] == "idempotency_key_reused"
    assert _count(api) == 1


def test_keys_are_scoped_by_tenant(api: Api) -> None:
    a = api("POST", "/v1/memories", key="acme-key", body=BODY, headers={"Idempotency-Key": "same"})
    b = api("POST", "/v1/memories", key="globex-key", body=BODY, headers={"Idempotency-Key": "same"})
    assert a[0] == b[0] == 202
    assert a[1]["accepted"] != b[1]["accepted"]  # globex did not get acme's replay
    assert _count(api, "acme-key") == 1 and _count(api, "globex-key") == 1


def test_a_failed_request_does_not_burn_the_key(api: Api) -> None:
    bad = {**BODY, "messages": [{"role": "narrator", "content": "hello"}]}
    assert api("POST", "/v1/memories", body=bad, headers={"Idempotency-Key": "k"})[0] == 422
    assert api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "k"})[0] == 202
    assert _count(api) == 1


def test_invalid_key_header(api: Api) -> None:
    status, body = api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "has space"})
    assert status == 422 and body["error"]["details"][0]["location"] == "header"


def test_sqlite_layer_claims_only_absent_expired_or_stuck_keys(settings: Settings) -> None:
    db = Database(settings.db_path)
    layer = SqlitePersistenceLayer(db)
    now = int(time.time())
    layer._put_record(
        DataRecord(
            "k1",
            status="INPROGRESS",
            expiry_timestamp=now + 60,
            in_progress_expiry_timestamp=(now + 60) * 1000,
        )
    )
    with pytest.raises(IdempotencyItemAlreadyExistsError):
        layer._put_record(DataRecord("k1", status="INPROGRESS", expiry_timestamp=now + 60))
    # In progress past its in-progress expiry (the first attempt died): claimable again.
    layer._put_record(
        DataRecord(
            "k2",
            status="INPROGRESS",
            expiry_timestamp=now + 60,
            in_progress_expiry_timestamp=(now - 1) * 1000,
        )
    )
    layer._put_record(DataRecord("k2", status="INPROGRESS", expiry_timestamp=now + 60))
    # Completed but expired: claimable again.
    layer._put_record(DataRecord("k3", status="COMPLETED", expiry_timestamp=now - 5, response_data="{}"))
    layer._put_record(DataRecord("k3", status="INPROGRESS", expiry_timestamp=now + 60))
    assert layer._get_record("k3").status == "INPROGRESS"
    layer._update_record(
        DataRecord("k3", status="COMPLETED", expiry_timestamp=now + 60, response_data='{"a": 1}')
    )
    assert layer._get_record("k3").response_data == '{"a": 1}'
    layer._delete_record(DataRecord("k3"))
    db.close()


@pytest.fixture
def dynamodb() -> Iterator[object]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        # The Powertools default layout, as the CDK app provisions it.
        client.create_table(
            TableName="memstack-idempotency",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        yield client


def test_dynamodb_persistence_in_aws(dynamodb: object, service: MemoryService, settings: Settings) -> None:
    aws_settings = settings.updated(idempotency_table="memstack-idempotency")
    layer, close = build_persistence(aws_settings, dynamodb_client=dynamodb)
    api = Api(create_app(service, aws_settings, ApiKeyAuthenticator(KEYS), persistence=layer))
    first = api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "aws-1"})
    second = api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "aws-1"})
    assert first == second and first[0] == 202
    assert _count(api) == 1
    items = dynamodb.scan(TableName="memstack-idempotency")["Items"]  # type: ignore[attr-defined]
    assert len(items) == 1 and items[0]["status"]["S"] == "COMPLETED"
    assert api("GET", "/v1/health")[1]["backends"]["idempotency"] == "dynamodb"
    close_app(api.app)
    close()


def test_erase_removes_the_users_dynamodb_records_and_only_theirs(
    dynamodb: object, service: MemoryService, settings: Settings
) -> None:
    """The recorded answers list message ids: DELETE /v1/users/{id} finds them by owner and deletes them."""
    aws_settings = settings.updated(idempotency_table="memstack-idempotency")
    layer, close = build_persistence(aws_settings, dynamodb_client=dynamodb)
    api = Api(create_app(service, aws_settings, ApiKeyAuthenticator(KEYS), persistence=layer))
    bob = {**BODY, "user_id": "bob"}
    for n in range(3):
        assert api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": f"a-{n}"})[0] == 202
    assert api("POST", "/v1/memories", body=bob, headers={"Idempotency-Key": "b-1"})[0] == 202
    items = dynamodb.scan(TableName="memstack-idempotency")["Items"]  # type: ignore[attr-defined]
    assert all("alice" not in str(i["owner"]) for i in items)  # the owner is a hash, not the user id
    status, erased = api("DELETE", "/v1/users/alice")
    assert status == 200 and erased["erased"]["idempotency"] == 3
    left = dynamodb.scan(TableName="memstack-idempotency")["Items"]  # type: ignore[attr-defined]
    assert len(left) == 1 and "b-1" not in str(left)  # the key is hashed; bob's one record remains
    # A retry of an erased request is a new request (nothing replays the erased answer).
    assert api("POST", "/v1/memories", body=BODY, headers={"Idempotency-Key": "a-0"})[0] == 202
    assert _count(api) == 1
    close_app(api.app)
    close()
