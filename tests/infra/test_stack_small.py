"""The small tier (DynamoDB store): every capability's properties, cdk-nag clean."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from tests.infra.conftest import SMALL_CONTEXT, Synth, effective

pytestmark = pytest.mark.slow

RERANK_ARN = SMALL_CONTEXT["bedrock_rerank_model_arn"]


def _table(s: Synth, key: str, ttl: str | None = None) -> dict[str, Any]:
    for p in s.props("AWS::DynamoDB::Table"):
        keys = {k["AttributeName"]: k["KeyType"] for k in p["KeySchema"]}
        if keys.get(key) == "HASH" and (
            ttl is None or p.get("TimeToLiveSpecification", {}).get("AttributeName") == ttl
        ):
            return p
    raise AssertionError(f"no table keyed by {key} (ttl {ttl})")


def _function_env(s: Synth, service: str) -> dict[str, Any]:
    for p in s.props("AWS::Lambda::Function"):
        env = p.get("Environment", {}).get("Variables", {})
        if env.get("POWERTOOLS_SERVICE_NAME") == service:
            return env
    raise AssertionError(f"no function for service {service}")


def _statements(s: Synth) -> list[dict[str, Any]]:
    return [st for p in s.props("AWS::IAM::Policy") for st in p["PolicyDocument"]["Statement"]]


def test_synth_is_cdk_nag_clean(small: Synth) -> None:
    report = small.outdir / "validation-report.json"
    if report.exists():  # written only when a plugin ran; then it must be a success
        reports = json.loads(report.read_text())["pluginReports"]
        assert all(r["conclusion"] == "success" for r in reports), reports


def test_stm_table_ttl_pending_index_and_protection(small: Synth) -> None:
    stm = _table(small, "pk", ttl="expires_at")
    assert stm["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert [k["AttributeName"] for k in stm["KeySchema"]] == ["pk", "sk"]
    [gsi] = stm["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "pending"
    assert gsi["KeySchema"] == [
        {"AttributeName": "pending", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert stm["BillingMode"] == "PAY_PER_REQUEST"
    assert stm["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert stm["SSESpecification"]["SSEEnabled"] is True


def test_memories_and_idempotency_tables(small: Synth) -> None:
    tables = small.props("AWS::DynamoDB::Table")
    memories = [t for t in tables if "TimeToLiveSpecification" not in t]
    assert len(memories) == 1
    assert memories[0]["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert memories[0]["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    idem = _table(small, "id", ttl="expiration")
    assert idem["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert _function_env(small, "memstack-api")["MEMSTACK_STORE_BACKEND"] == "dynamodb"


def test_queues_have_dlq_redrive_and_visibility_matched_to_workers(small: Synth) -> None:
    queues = small.resources("AWS::SQS::Queue")
    workers = {
        p["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]: p["Timeout"]
        for p in small.props("AWS::Lambda::Function")
        if "Environment" in p
    }
    redriven = [q["Properties"] for q in queues.values() if "RedrivePolicy" in q["Properties"]]
    assert len(redriven) == 3  # extraction, consolidation, webhook deliveries
    for q in redriven:
        assert q["RedrivePolicy"]["maxReceiveCount"] == 3
        dlq_id = q["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]
        assert queues[dlq_id]["Properties"]["SqsManagedSseEnabled"] is True
        assert q["SqsManagedSseEnabled"] is True
    visibility = sorted(q["VisibilityTimeout"] for q in redriven)
    assert visibility == sorted(
        6 * workers[f"memstack-{name}"] for name in ("extraction", "consolidation", "webhooks")
    )


def test_queue_consumers_limit_concurrency_and_report_failures(small: Synth) -> None:
    mappings = small.props("AWS::Lambda::EventSourceMapping")
    assert len(mappings) == 3
    for m in mappings:
        assert m["ScalingConfig"]["MaximumConcurrency"] == 2
        assert m["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_every_function_is_traced_arm64_python312_with_layer_and_retention(small: Synth) -> None:
    functions = small.props("AWS::Lambda::Function")
    assert len(functions) == 7  # the six of every tier and the deploy-time directory backfill
    for fn in functions:
        assert fn["TracingConfig"] == {"Mode": "Active"}
        assert fn["Architectures"] == ["arm64"]
        assert fn["Runtime"] == "python3.12"
        assert fn["Handler"] == "handler.handler"
        assert len(fn["Layers"]) == 1
        env = fn["Environment"]["Variables"]
        assert env["POWERTOOLS_LOG_LEVEL"] == "INFO"
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "memstack"
        assert env["POWERTOOLS_SERVICE_NAME"].startswith("memstack-")
    groups = small.props("AWS::Logs::LogGroup")
    assert groups and all(g["RetentionInDays"] == 30 for g in groups)


def test_function_environment_matches_settings_names(small: Synth) -> None:
    from memstack.settings import Settings

    env = _function_env(small, "memstack-api")
    names = {f"MEMSTACK_{name.upper()}" for name in Settings.variables()}
    memstack_vars = {k for k in env if k.startswith("MEMSTACK_")}
    assert memstack_vars <= names, memstack_vars - names
    assert env["MEMSTACK_EMBEDDER"] == "bedrock-titan"
    assert env["MEMSTACK_LLM"] == "bedrock"
    assert env["MEMSTACK_RERANKER"] == "bedrock"
    assert env["MEMSTACK_QUEUE_BACKEND"] == "sqs"
    assert env["MEMSTACK_STM_BACKEND"] == "dynamodb"
    assert env["MEMSTACK_BEDROCK_RERANK_MODEL_ARN"] == RERANK_ARN
    for key in (
        "MEMSTACK_MEMORIES_TABLE",
        "MEMSTACK_STM_TABLE",
        "MEMSTACK_IDEMPOTENCY_TABLE",
        "MEMSTACK_EXTRACTION_QUEUE_URL",
        "MEMSTACK_CONSOLIDATION_QUEUE_URL",
        "MEMSTACK_EXTRACTION_DLQ_URL",
        "MEMSTACK_CONSOLIDATION_DLQ_URL",
    ):
        assert key in env
    # Titan v2 embeds at 256/512/1024 and is not Matryoshka-trained: the coarse pass uses all of it.
    assert env["MEMSTACK_EMBEDDING_DIM"] == env["MEMSTACK_COARSE_DIM"] == "1024"
    assert env["MEMSTACK_SYNC_TIMEOUT_SECONDS"] == "20.0"
    cost = _function_env(small, "memstack-cost")
    assert "MEMSTACK_ALERT_TOPIC_ARN" in cost and effective(cost, "project_tag") == "memstack"
    assert cost["MEMSTACK_TIER_TAG"] == "small"
    assert not any(k.startswith("MEMSTACK_RRF") for k in cost)  # only what the cost report reads


def test_the_scheduler_slot_is_the_schedule_rate(small: Synth) -> None:
    """Item 4: the job-id slot must be the rule's rate, or runs within one slot share a job id."""
    slot = effective(_function_env(small, "memstack-scheduler"), "consolidation_interval_seconds")
    assert float(slot) == 3600


def test_the_api_answers_before_the_gateway_gives_up(small: Synth) -> None:
    [api] = [
        p
        for p in small.props("AWS::Lambda::Function")
        if p.get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME") == "memstack-api"
    ]
    assert api["Timeout"] < 29  # API Gateway's integration limit
    sync = float(api["Environment"]["Variables"]["MEMSTACK_SYNC_TIMEOUT_SECONDS"])
    assert sync < api["Timeout"]


def test_bedrock_access_is_limited_to_the_configured_models(small: Synth) -> None:
    bedrock = [
        st for st in _statements(small) if any(a.startswith("bedrock:") for a in _as_list(st["Action"]))
    ]
    invoke = [
        st for st in bedrock if _as_list(st["Action"]) == ["bedrock:InvokeModel"] and "Condition" not in st
    ]
    resources = {json.dumps(r, sort_keys=True) for st in invoke for r in _as_list(st["Resource"])}
    for profile in (
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ):
        assert any(f"inference-profile/{profile}" in r for r in resources), profile
    assert any("foundation-model/amazon.titan-embed-text-v2:0" in r for r in resources)
    # Behind a profile, the model is reachable only through that profile.
    conditioned = [st for st in _statements(small) if "Condition" in st]
    for model in ("anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic.claude-sonnet-4-5-20250929-v1:0"):
        [st] = {
            json.dumps(st, sort_keys=True): st
            for st in conditioned
            if any(f"foundation-model/{model}" in json.dumps(r) for r in _as_list(st["Resource"]))
        }.values()
        profile_arn = json.dumps(st["Condition"]["StringEquals"]["bedrock:InferenceProfileArn"])
        assert f"inference-profile/us.{model}" in profile_arn
    assert any(RERANK_ARN in r for r in resources)
    assert not any(r == '"*"' or "foundation-model/*" in r for r in resources)
    assert not any("bedrock:*::" in r for r in resources)  # the Region wildcard only under a condition
    rerank = [st for st in bedrock if "bedrock:Rerank" in _as_list(st["Action"])]
    assert len(rerank) == 1  # only the API reranks


def test_api_methods_use_iam_and_stage_is_throttled_logged_traced(small: Synth) -> None:
    methods = [m for m in small.props("AWS::ApiGateway::Method") if m["HttpMethod"] == "ANY"]
    assert methods
    assert all(m["AuthorizationType"] == "AWS_IAM" for m in methods)
    assert all("RequestValidatorId" in m for m in methods)
    [stage] = small.props("AWS::ApiGateway::Stage")
    assert stage["TracingEnabled"] is True
    [settings] = stage["MethodSettings"]
    assert settings["ThrottlingRateLimit"] == 10 and settings["ThrottlingBurstLimit"] == 20
    assert settings["DataTraceEnabled"] is False
    # No API keys by default, so no usage plan (it would meter nobody); tests/infra/test_api_auth.py.
    assert not small.props("AWS::ApiGateway::UsagePlan")
    assert not [m for m in methods if m["HttpMethod"] == "OPTIONS"]  # CORS off


def test_schedules(small: Synth) -> None:
    expressions = {r["ScheduleExpression"] for r in small.props("AWS::Events::Rule")}
    assert expressions == {"rate(1 hour)", "cron(0 6 * * ? *)"}


def test_retrieval_latency_alarm(small: Synth) -> None:
    small.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": "RetrievalLatency",
            "Namespace": "memstack",
            "ExtendedStatistic": "p95",
            "Dimensions": [{"Name": "service", "Value": "memstack-api"}],
            "Threshold": 500,
            "ComparisonOperator": "GreaterThanThreshold",
            "AlarmActions": Match.any_value(),
        },
    )


def test_dlq_errors_throttles_and_token_alarms(small: Synth) -> None:
    alarms = small.props("AWS::CloudWatch::Alarm")
    by_metric: dict[str, list[dict[str, Any]]] = {}
    for a in alarms:
        by_metric.setdefault(a.get("MetricName", "math"), []).append(a)
        assert a["AlarmActions"], a
    assert len(by_metric["Errors"]) == 6 and len(by_metric["Throttles"]) == 6
    dlq = by_metric["ApproximateNumberOfMessagesVisible"]
    assert len(dlq) == 3 and all(a["Threshold"] == 0 for a in dlq)
    assert all(a["ComparisonOperator"] == "GreaterThanThreshold" for a in dlq)
    assert len(by_metric["ApproximateAgeOfOldestMessage"]) == 3
    [tokens] = by_metric["math"]
    assert tokens["Threshold"] == 2_000_000
    math = [m for m in tokens["Metrics"] if "Expression" in m]
    assert math and math[0]["Expression"].startswith("SUM(")
    inputs = [m["MetricStat"]["Metric"] for m in tokens["Metrics"] if "MetricStat" in m]
    assert {m["MetricName"] for m in inputs} == {"InputTokenCount"}
    assert all(m["Namespace"] == "AWS/Bedrock" for m in inputs)


def test_alert_topic_is_kms_encrypted_with_email(small: Synth) -> None:
    [topic] = small.props("AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic
    [sub] = small.props("AWS::SNS::Subscription")
    assert sub["Protocol"] == "email" and sub["Endpoint"] == "ops@example.com"
    [key] = small.props("AWS::KMS::Key")
    assert key["EnableKeyRotation"] is True


def test_budget_notifications_and_tag_filter(small: Synth) -> None:
    [budget] = small.props("AWS::Budgets::Budget")
    data = budget["Budget"]
    assert data["BudgetType"] == "COST" and data["TimeUnit"] == "MONTHLY"
    assert data["BudgetLimit"] == {"Amount": 30, "Unit": "USD"}  # docs/deploy.md: ~$22 estimated
    # Project AND Tier: a second tier in the same account is not counted against this budget.
    assert "CostFilters" not in data
    assert data["FilterExpression"] == {
        "And": [
            {"Tags": {"Key": "user:Project", "Values": ["memstack"], "MatchOptions": ["EQUALS"]}},
            {"Tags": {"Key": "user:Tier", "Values": ["small"], "MatchOptions": ["EQUALS"]}},
        ]
    }
    notes = {
        (n["Notification"]["NotificationType"], n["Notification"]["Threshold"])
        for n in budget["NotificationsWithSubscribers"]
    }
    assert notes == {("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100)}
    for n in budget["NotificationsWithSubscribers"]:
        assert n["Notification"]["ThresholdType"] == "PERCENTAGE"
        assert n["Subscribers"][0]["SubscriptionType"] == "SNS"


def test_cost_anomaly_monitor_on_the_project_and_tier_tags(small: Synth) -> None:
    [monitor] = small.props("AWS::CE::AnomalyMonitor")
    assert monitor["MonitorType"] == "CUSTOM"
    assert json.loads(monitor["MonitorSpecification"]) == {
        "And": [
            {"Tags": {"Key": "Project", "Values": ["memstack"], "MatchOptions": ["EQUALS"]}},
            {"Tags": {"Key": "Tier", "Values": ["small"], "MatchOptions": ["EQUALS"]}},
        ]
    }
    [sub] = small.props("AWS::CE::AnomalySubscription")
    assert sub["Frequency"] == "IMMEDIATE" and sub["Subscribers"][0]["Type"] == "SNS"


def test_cost_report_can_read_costs_and_publish(small: Synth) -> None:
    statements = _statements(small)
    assert any(_as_list(st["Action"]) == ["ce:GetCostAndUsage"] for st in statements)
    assert any("sns:Publish" in _as_list(st["Action"]) for st in statements)


def test_every_taggable_resource_is_tagged(small: Synth) -> None:
    tagged = 0
    for res in small.raw["Resources"].values():
        tags = res.get("Properties", {}).get("Tags")
        if isinstance(tags, list):
            pairs = {t["Key"]: t["Value"] for t in tags}
            assert pairs.get("Project") == "memstack" and pairs.get("Tier") == "small", res["Type"]
            tagged += 1
    assert tagged >= 10


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_dashboard_shows_latency_stages_counts_tokens_and_dlqs(small: Synth) -> None:
    [dashboard] = small.props("AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["DashboardBody"])
    for stat in ("p50", "p90", "p95", "p99"):
        assert "RetrievalLatency" in body and stat in body, stat
    assert "memory_retrieval" in body and "stage_durations.vector" in body
    for name in (
        "MessagesIngested",
        "ExtractionOperations",
        "JobsSucceeded",
        "InputTokenCount",
        "OutputTokenCount",
        "ApproximateNumberOfMessagesVisible",
    ):
        assert name in body, name


def test_every_environment_fits_lambdas_4_kb_limit(small: Synth) -> None:
    """Every setting a function reads is in its environment, which Lambda caps at 4 KB in all."""
    for fn in small.props("AWS::Lambda::Function"):
        env = fn.get("Environment", {}).get("Variables", {})
        # a token (table name, queue URL, ARN) resolves to at most ~128 characters
        size = sum(len(k) + (len(v) if isinstance(v, str) else 128) for k, v in env.items())
        assert size < 4096, (fn.get("Description"), size)


def test_only_the_api_reads_the_generated_cursor_key(small: Synth) -> None:
    """List cursors are signed with a per-deployment secret (issue 25, item 7), readable by the API only."""
    secrets = small.resources("AWS::SecretsManager::Secret")
    cursor = [lid for lid, r in secrets.items() if "cursor" in r["Properties"].get("Description", "")]
    assert len(cursor) == 1
    assert "GenerateSecretString" in secrets[cursor[0]]["Properties"]
    api_env = _function_env(small, "memstack-api")
    assert api_env["MEMSTACK_CURSOR_SECRET_ARN"] == {"Ref": cursor[0]}
    readers = []
    for policy in small.props("AWS::IAM::Policy"):
        for st in policy["PolicyDocument"]["Statement"]:
            if "secretsmanager:GetSecretValue" in _as_list(st["Action"]) and st["Resource"] == {
                "Ref": cursor[0]
            }:
                readers += [r["Ref"] for r in policy["Roles"]]
    assert len(readers) == 1 and "Api" in readers[0], readers
    for service in ("memstack-extraction", "memstack-scheduler", "memstack-consolidation"):
        assert "MEMSTACK_CURSOR_SECRET_ARN" not in _function_env(small, service)


def test_the_user_directory_backfill_runs_at_deploy_with_only_what_it_calls(small: Synth) -> None:
    """The custom resource on the memories table; its function may scan, read and put, nothing else."""
    [resource] = small.resources("Custom::MemstackUserDirectory").values()
    props = resource["Properties"]
    [(table_id, _)] = [
        (tid, t)
        for tid, t in small.resources("AWS::DynamoDB::Table").items()
        if tid.startswith("StorageMemoriesTable")
    ]
    assert props["Table"] == {"Ref": table_id} and props["Backfill"] == "1"
    env = _function_env(small, "memstack-migrate")
    assert env["MEMSTACK_MEMORIES_TABLE"] == {"Ref": table_id}
    [role_policy] = [
        p for p in small.props("AWS::IAM::Policy") if "SchemaMigration" in json.dumps(p.get("Roles"))
    ]
    actions = {
        a
        for st in role_policy["PolicyDocument"]["Statement"]
        if table_id in json.dumps(st["Resource"])
        for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
    }
    assert actions == {
        "dynamodb:Scan",
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:ConditionCheckItem",
        "dynamodb:PutItem",
    }


def test_the_snapshot_bucket_is_private_unversioned_and_only_the_data_plane_touches_its_prefix(
    small: Synth,
) -> None:
    """Issue 28: the per-user snapshots a cold container loads. Not versioned (an erase leaves no
    noncurrent version), TLS only, no public access; exactly the adapter's calls, on its prefix."""
    [(bucket_id, bucket)] = small.resources("AWS::S3::Bucket").items()
    props = bucket["Properties"]
    assert "VersioningConfiguration" not in props and bucket["DeletionPolicy"] == "Retain"
    assert all(props["PublicAccessBlockConfiguration"].values())
    [policy] = small.props("AWS::S3::BucketPolicy")
    [deny] = policy["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    granted: dict[str, set[str]] = {}
    for role_policy in small.props("AWS::IAM::Policy"):
        for st in role_policy["PolicyDocument"]["Statement"]:
            if bucket_id in json.dumps(st["Resource"]):
                for role in role_policy["Roles"]:
                    granted.setdefault(role["Ref"], set()).update(_as_list(st["Action"]))
                if st["Action"] == "s3:ListBucket":
                    assert st["Condition"] == {"StringLike": {"s3:prefix": ["snapshots/*"]}}
                else:
                    assert "/snapshots/*" in json.dumps(st["Resource"])
    assert sorted(r.split("ServiceRole")[0] for r in granted) == sorted(
        ["ComputeApiFunction", "ComputeExtractionWorkerFunction", "ComputeConsolidationWorkerFunction"]
    ), granted
    assert all(
        a == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"} for a in granted.values()
    )
    for service in ("memstack-api", "memstack-extraction", "memstack-consolidation"):
        assert _function_env(small, service)["MEMSTACK_SNAPSHOT_BUCKET"] == {"Ref": bucket_id}
