"""DynamoDB tables: short-term memory, long-term memories (``dynamodb`` backend), Powertools idempotency;
the ``dynamodb`` backend's snapshot bucket.

Key schemas are the contract with the adapters (layers/memstack/adapters);
change them only together. All tables: on-demand billing, point-in-time
recovery, encryption at rest. The memory tables are retained on stack
deletion (they hold users' data); the idempotency table is disposable.

The snapshot bucket holds one packed copy of each user's partition (what a
cold container loads instead of reading the partition; adapters/dynamodb/
snapshot_objects.py). It has no fixed cost (storage and requests only). Not
versioned: an erase deletes a user's objects, and a versioned bucket would
keep them as noncurrent versions.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct
from memstack.adapters.dynamodb.snapshot_objects import PREFIX as SNAPSHOT_PREFIX

from stacks.config import StackConfig

_S = dynamodb.AttributeType.STRING


def _table(
    scope: Construct, cid: str, *, partition: str, sort: str | None, ttl: str | None, removal: RemovalPolicy
) -> dynamodb.Table:
    return dynamodb.Table(
        scope,
        cid,
        partition_key=dynamodb.Attribute(name=partition, type=_S),
        sort_key=dynamodb.Attribute(name=sort, type=_S) if sort else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        time_to_live_attribute=ttl,
        removal_policy=removal,
    )


class Storage(Construct):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig) -> None:
        super().__init__(scope, cid)
        # STM: pk "<tenant>#<user_id>", sk "<ISO timestamp>#<message id>", expires after stm_ttl_days.
        self.stm_table = _table(
            self, "StmTable", partition="pk", sort="sk", ttl="expires_at", removal=RemovalPolicy.RETAIN
        )
        # Sparse: only unconsolidated entries carry "pending", so the scheduler reads just those.
        self.stm_table.add_global_secondary_index(
            index_name="pending",
            partition_key=dynamodb.Attribute(name="pending", type=_S),
            sort_key=dynamodb.Attribute(name="sk", type=_S),
            projection_type=dynamodb.ProjectionType.ALL,
        )
        # LTM records for the small tier (medium/large keep them in OpenSearch).
        self.memories_table: dynamodb.Table | None = None
        self.snapshot_bucket: s3.Bucket | None = None
        if config.store_backend == "dynamodb":
            self.memories_table = _table(
                self, "MemoriesTable", partition="pk", sort="sk", ttl=None, removal=RemovalPolicy.RETAIN
            )
            self.snapshot_bucket = s3.Bucket(
                self,
                "SnapshotBucket",
                encryption=s3.BucketEncryption.S3_MANAGED,
                block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
                enforce_ssl=True,
                versioned=False,
                object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
                # Derived data, but users' data: kept with the memory table when the stack goes.
                removal_policy=RemovalPolicy.RETAIN,
                lifecycle_rules=[s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(1))],
            )
        # Powertools idempotency: its default layout ("id" key, "expiration" TTL).
        self.idempotency_table = _table(
            self,
            "IdempotencyTable",
            partition="id",
            sort=None,
            ttl="expiration",
            removal=RemovalPolicy.DESTROY,
        )

        # The key that signs list cursors (docs/reliability.md), generated at deploy: a cursor
        # cannot be forged without it. Only the API function reads it (compute.py).
        self.cursor_secret = secretsmanager.Secret(
            self,
            "CursorKey",
            description="memstack: the key that signs list cursors",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64, exclude_punctuation=True
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )

    def grant_snapshots(self, grantee: iam.IGrantable) -> None:
        """Exactly what the snapshot adapter does, under its prefix: a cold search loads an object
        (GetObject), a compaction writes one and deletes the one it replaces (PutObject,
        DeleteObject), an erase lists the user's and deletes them (ListBucket, DeleteObject)."""
        if self.snapshot_bucket is None:
            return
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            resource_arns=[self.snapshot_bucket.arn_for_objects(f"{SNAPSHOT_PREFIX}*")],
        )
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:ListBucket"],
            resource_arns=[self.snapshot_bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{SNAPSHOT_PREFIX}*"]}},
        )

    def data_tables(self) -> list[dynamodb.Table]:
        tables = [self.stm_table, self.idempotency_table]
        if self.memories_table is not None:
            tables.append(self.memories_table)
        return tables
