"""``store_backend=postgres``: Aurora PostgreSQL Serverless v2 behind the Data API, cdk-nag clean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.infra.conftest import Synth, effective, synth

pytestmark = pytest.mark.slow


@pytest.fixture
def aurora(medium_postgres: Synth) -> Synth:
    # A synth that returns passed cdk-nag's AwsSolutions checks.
    return medium_postgres


def _env(s: Synth, service: str) -> dict[str, Any]:
    [env] = [
        p["Environment"]["Variables"]
        for p in s.props("AWS::Lambda::Function")
        if p.get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME") == service
    ]
    return env


def test_cluster_is_serverless_v2_encrypted_backed_up_protected_and_data_api(aurora: Synth) -> None:
    [cluster] = aurora.props("AWS::RDS::DBCluster")
    assert cluster["Engine"] == "aurora-postgresql"
    assert cluster["EngineVersion"].startswith("17.")
    assert cluster["ServerlessV2ScalingConfiguration"]["MinCapacity"] == 0
    assert cluster["ServerlessV2ScalingConfiguration"]["MaxCapacity"] == 4
    assert cluster["ServerlessV2ScalingConfiguration"]["SecondsUntilAutoPause"] == 600
    assert cluster["StorageEncrypted"] is True
    assert cluster["DeletionProtection"] is True
    assert cluster["BackupRetentionPeriod"] == 7
    assert cluster["EnableHttpEndpoint"] is True
    assert cluster["EnableIAMDatabaseAuthentication"] is True
    assert cluster["EnableCloudwatchLogsExports"] == ["postgresql"]
    assert cluster["DatabaseName"] == "memstack"
    assert cluster["Port"] != 5432
    [instance] = aurora.props("AWS::RDS::DBInstance")
    assert instance["DBInstanceClass"] == "db.serverless"
    assert not instance.get("PubliclyAccessible", False)
    [cluster_resource] = aurora.resources("AWS::RDS::DBCluster").values()
    assert cluster_resource["DeletionPolicy"] == "Snapshot"


def test_credentials_are_a_generated_secret_and_there_is_no_nat(aurora: Synth) -> None:
    # The database's secret (the other one keys list cursors: tests/infra/test_stack_small.py).
    [secret] = [
        p for p in aurora.props("AWS::SecretsManager::Secret") if "cursor" not in p.get("Description", "")
    ]
    assert "GenerateSecretString" in secret
    assert aurora.resources("AWS::EC2::NatGateway") == {}
    assert aurora.resources("AWS::EC2::InternetGateway") == {}
    assert len(aurora.resources("AWS::EC2::FlowLog")) == 1
    # The functions are outside the VPC: they reach the cluster through the Data API.
    assert all("VpcConfig" not in p for p in aurora.props("AWS::Lambda::Function"))


def test_functions_use_the_data_api_with_granted_access(aurora: Synth) -> None:
    from memstack.settings import Settings

    env = _env(aurora, "memstack-api")
    assert env["MEMSTACK_STORE_BACKEND"] == "postgres"
    assert env["MEMSTACK_POSTGRES_EXECUTOR"] == "data-api"
    assert effective(env, "postgres_database") == "memstack"
    # Issue 23, item 6: migrations run at deploy time (the schema custom resource), never on a cold start.
    assert env["MEMSTACK_POSTGRES_MIGRATE_ON_START"] == "false"
    assert {"MEMSTACK_POSTGRES_CLUSTER_ARN", "MEMSTACK_POSTGRES_SECRET_ARN"} <= set(env)
    assert "MEMSTACK_OPENSEARCH_ENDPOINT" not in env and "MEMSTACK_MEMORIES_TABLE" not in env
    names = {f"MEMSTACK_{name.upper()}" for name in Settings.variables()}
    assert {k for k in env if k.startswith("MEMSTACK_")} <= names
    # The settings the functions load accept this environment (ARNs are tokens until deploy).
    postgres = {k.removeprefix("MEMSTACK_").lower(): v for k, v in env.items() if "POSTGRES" in k}
    Settings(store_backend="postgres", **{k: v if isinstance(v, str) else "arn" for k, v in postgres.items()})
    assert aurora.resources("AWS::OpenSearchService::Domain") == {}
    policies = [p["PolicyDocument"]["Statement"] for p in aurora.props("AWS::IAM::Policy")]
    statements = [s for stmts in policies for s in stmts]
    data_api = [s for s in statements if "rds-data:ExecuteStatement" in _as_list(s["Action"])]
    secret_reads = [
        s
        for s in statements
        if "secretsmanager:GetSecretValue" in _as_list(s["Action"])
        and "Cursor" not in json.dumps(s["Resource"])
    ]
    # The functions that open the store: the API, both workers, the webhook worker (tenants' webhook
    # settings are beside the memories) and the deploy-time migration; not the scheduler (it never
    # opens the store: item 6) nor the cost report. (The API also reads the cursor key: test_stack_small.py.)
    assert len(data_api) == 5 and len(secret_reads) == 5
    assert len(aurora.resources("Custom::MemstackSchema")) == 1
    assert "MEMSTACK_STORE_BACKEND" not in _env(aurora, "memstack-cost")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_alarms_and_dashboard(aurora: Synth) -> None:
    metrics = {p["MetricName"] for p in aurora.props("AWS::CloudWatch::Alarm") if "MetricName" in p}
    assert {"ACUUtilization", "DatabaseConnections", "Deadlocks"} <= metrics
    for alarm in aurora.props("AWS::CloudWatch::Alarm"):
        if alarm.get("MetricName") in {"ACUUtilization", "DatabaseConnections", "Deadlocks"}:
            assert alarm["AlarmActions"]
    [dashboard] = aurora.props("AWS::CloudWatch::Dashboard")
    body = str(dashboard["DashboardBody"])
    assert "ACUUtilization" in body and "Deadlocks" in body and "ServerlessDatabaseCapacity" in body


def test_min_capacity_and_rotation_are_options(layer_dir: Path, tmp_path: Path) -> None:
    s = synth(
        "medium",
        layer_dir,
        tmp_path,
        store_backend="postgres",
        aurora_min_acu="0.5",
        aurora_max_acu="8",
        aurora_secret_rotation="true",
    )
    [cluster] = s.props("AWS::RDS::DBCluster")
    scaling = cluster["ServerlessV2ScalingConfiguration"]
    assert (scaling["MinCapacity"], scaling["MaxCapacity"]) == (0.5, 8)
    assert "SecondsUntilAutoPause" not in scaling
    assert len(s.resources("AWS::SecretsManager::RotationSchedule")) == 1
    assert len(s.resources("AWS::EC2::VPCEndpoint")) == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"aurora_min_acu": 0.3}, "aurora_min_acu must be between 0 and 256 in steps of 0.5"),
        ({"aurora_max_acu": 0.5}, "aurora_max_acu must be at least 1"),
        ({"aurora_min_acu": 8.0, "aurora_max_acu": 4.0}, "not below aurora_min_acu"),
        ({"aurora_backup_days": 0}, "aurora_backup_days"),
        ({"store_backend": "mysql"}, "store_backend must be one of dynamodb, opensearch, postgres"),
    ],
)
def test_bad_aurora_settings_stop_synth_with_the_reason(changes: dict[str, Any], message: str) -> None:
    from stacks.config import ConfigError, StackConfig

    config = StackConfig(store_backend="postgres").replace(**changes)
    with pytest.raises(ConfigError, match=message):
        config.validate()


def test_every_aurora_alarm_has_its_runbook_entry(aurora: Synth) -> None:
    runbook = (Path(__file__).resolve().parents[2] / "docs" / "operations.md").read_text()
    alarms = [a.node.id for a in aurora.stack.database.alarms]
    assert len(alarms) == 3
    assert all(f"`{a}`" in runbook for a in alarms), alarms


def test_the_documented_migrate_command_uses_the_functions_dimensions(aurora: Synth) -> None:
    """Issue 23, item 3: docs/deploy.md once ran ``MEMSTACK_COARSE_DIM=256 memstack migrate`` against
    functions configured with 1024, and the store refuses a schema of another coarse dimension."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "deploy.md").read_text()
    # The postgres store's commands (the dynamodb store's directory backfill reads no dimensions).
    commands = [
        c
        for c in re.findall(r"```bash\n(.*?)```", text, re.S)
        if "memstack migrate" in c and "MEMSTACK_STORE_BACKEND=dynamodb" not in c
    ]
    assert commands
    settings = aurora.stack.compute.settings
    for command in commands:
        given = dict(re.findall(r"MEMSTACK_(EMBEDDING_DIM|COARSE_DIM)=(\d+)", command))
        assert given == {
            "EMBEDDING_DIM": str(settings.embedding.embedding_dim),
            "COARSE_DIM": str(settings.embedding.coarse_dim),
        }
