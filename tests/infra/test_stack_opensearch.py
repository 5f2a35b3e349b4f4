"""The medium and large tiers (OpenSearch store), and the serverless-collection variant."""

from __future__ import annotations

import json
from typing import Any

import pytest
from memstack.adapters.opensearch.permissions import collection_rules, domain_role

from tests.infra.conftest import Synth, effective

pytestmark = pytest.mark.slow


def _domain(s: Synth) -> dict[str, Any]:
    [domain] = s.props("AWS::OpenSearchService::Domain")
    return domain


def _env(s: Synth, service: str) -> dict[str, str]:
    [env] = [
        p["Environment"]["Variables"]
        for p in s.props("AWS::Lambda::Function")
        if p.get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME") == service
    ]
    return env


@pytest.mark.parametrize("tier", ["medium", "large"])
def test_domain_encryption_tls_and_access_control(tier: str, request: pytest.FixtureRequest) -> None:
    domain = _domain(request.getfixturevalue(tier))
    assert domain["EncryptionAtRestOptions"] == {"Enabled": True}
    assert domain["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    endpoint = domain["DomainEndpointOptions"]
    assert endpoint["EnforceHTTPS"] is True
    assert endpoint["TLSSecurityPolicy"] == "Policy-Min-TLS-1-2-2019-07"
    security = domain["AdvancedSecurityOptions"]
    assert security["Enabled"] is True and security["InternalUserDatabaseEnabled"] is False
    assert "MasterUserARN" in security["MasterUserOptions"]
    logs = domain["LogPublishingOptions"]
    assert {k for k, v in logs.items() if v["Enabled"]} == {
        "ES_APPLICATION_LOGS",
        "SEARCH_SLOW_LOGS",
        "INDEX_SLOW_LOGS",
        "AUDIT_LOGS",
    }
    assert domain["EBSOptions"]["VolumeType"] == "gp3"


def test_medium_is_two_nodes_over_two_zones(medium: Synth) -> None:
    cluster = _domain(medium)["ClusterConfig"]
    assert cluster["InstanceCount"] == 2
    assert cluster["ZoneAwarenessEnabled"] is True
    assert cluster["ZoneAwarenessConfig"] == {"AvailabilityZoneCount": 2}
    assert cluster.get("DedicatedMasterEnabled") is False


def test_large_is_three_zones_with_dedicated_masters(large: Synth) -> None:
    domain = _domain(large)
    cluster = domain["ClusterConfig"]
    assert cluster["ZoneAwarenessConfig"] == {"AvailabilityZoneCount": 3}
    assert cluster["InstanceCount"] == 3 and cluster["InstanceType"] == "r7g.xlarge.search"
    assert cluster["DedicatedMasterEnabled"] is True and cluster["DedicatedMasterCount"] == 3
    assert domain["EBSOptions"]["VolumeSize"] == 200


def test_functions_use_opensearch_and_no_memories_table(medium: Synth) -> None:
    env = _env(medium, "memstack-api")
    assert env["MEMSTACK_STORE_BACKEND"] == "opensearch"
    assert effective(env, "opensearch_service") == "es"
    assert "MEMSTACK_OPENSEARCH_ENDPOINT" in env
    assert "MEMSTACK_MEMORIES_TABLE" not in env
    assert effective(env, "reranker") == "none"  # no rerank model ARN in context
    keys = [t["KeySchema"][0]["AttributeName"] for t in medium.props("AWS::DynamoDB::Table")]
    assert sorted(keys) == ["id", "pk"]  # STM + idempotency only


def test_data_plane_roles_are_mapped_into_fine_grained_access_control(medium: Synth) -> None:
    [mapping] = medium.props("Custom::OpenSearchRoleMapping")
    app, maintenance = mapping["Roles"]
    roles = {r["Fn::GetAtt"][0] for r in app["BackendRoles"]}
    assert len(roles) == 4
    # The webhook worker reads tenants' webhook settings, kept beside the memories.
    data_plane = (
        "ComputeApi",
        "ComputeExtractionWorker",
        "ComputeConsolidationWorker",
        "ComputeWebhookWorker",
    )
    assert all(r.startswith(data_plane) for r in roles)
    # Item 1: exactly the permissions of the calls the store makes (permissions.CALLS), template included.
    expected = domain_role("runtime", "memstack-*")
    assert app["ClusterPermissions"] == expected["cluster_permissions"]
    assert "indices:admin/index_template/put" in app["ClusterPermissions"]
    assert app["IndexPatterns"] == ["memstack-*"]
    assert app["IndexPermissions"] == expected["index_permissions"][0]["allowed_actions"]  # type: ignore[index]
    assert maintenance["Name"] == "memstack_maintenance" and maintenance["BackendRoles"] == []
    # The mapping function runs as the FGAC master user.
    master = _domain(medium)["AdvancedSecurityOptions"]["MasterUserOptions"]["MasterUserARN"]
    [fn] = [
        p
        for p in medium.props("AWS::Lambda::Function")
        if p.get("Handler") == "index.handler" and p["Runtime"].startswith("python")
    ]
    assert fn["Role"] == master
    assert fn["TracingConfig"] == {"Mode": "Active"}


def test_opensearch_alarms(medium: Synth) -> None:
    alarms = {a["MetricName"]: a for a in medium.props("AWS::CloudWatch::Alarm") if "MetricName" in a}
    red = alarms["ClusterStatus.red"]
    assert red["Threshold"] == 1 and red["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarms["CPUUtilization"]["Threshold"] == 80
    assert alarms["JVMMemoryPressure"]["Threshold"] == 80
    free = alarms["FreeStorageSpace"]
    assert free["ComparisonOperator"] == "LessThanThreshold"
    assert free["Threshold"] == 50 * 1024 * 0.25  # a quarter of a node's 50 GB volume, in MB
    for alarm in (red, free):
        assert alarm["Namespace"] == "AWS/ES"


def test_tier_budget_and_throttles(medium: Synth, large: Synth) -> None:
    [mb] = medium.props("AWS::Budgets::Budget")
    [lb] = large.props("AWS::Budgets::Budget")
    assert mb["Budget"]["BudgetLimit"]["Amount"] == 1200 and lb["Budget"]["BudgetLimit"]["Amount"] == 10000
    [stage] = large.props("AWS::ApiGateway::Stage")
    assert stage["MethodSettings"][0]["ThrottlingRateLimit"] == 200
    for tpl, tier in ((medium, "medium"), (large, "large")):
        tags = {t["Key"]: t["Value"] for t in _domain(tpl)["Tags"]}
        assert tags == {"Project": "memstack", "Tier": tier}


def test_serverless_collection_with_its_policies(serverless: Synth) -> None:
    assert not serverless.props("AWS::OpenSearchService::Domain")
    [collection] = serverless.props("AWS::OpenSearchServerless::Collection")
    assert collection["Type"] == "VECTORSEARCH" and collection["Name"] == "memstack-medium"
    policies = {p["Type"]: p for p in serverless.props("AWS::OpenSearchServerless::SecurityPolicy")}
    assert json.loads(policies["encryption"]["Policy"])["AWSOwnedKey"] is True
    assert json.loads(policies["network"]["Policy"])[0]["Rules"][0]["Resource"] == [
        "collection/memstack-medium"
    ]
    [access] = serverless.props("AWS::OpenSearchServerless::AccessPolicy")
    rendered = json.dumps(access["Policy"])
    text = "".join(p for p in access["Policy"]["Fn::Join"][1] if isinstance(p, str))
    for rule in collection_rules("runtime", "memstack-medium"):
        # the store's calls' permissions, on serverless (the principals are tokens in between)
        assert json.dumps(rule["Permission"], separators=(",", ":")) in text
    for role in ("ComputeApi", "ComputeExtractionWorker", "ComputeConsolidationWorker"):
        assert role in rendered
    assert "ComputeCostReport" not in rendered
    env = _env(serverless, "memstack-api")
    assert env["MEMSTACK_OPENSEARCH_SERVICE"] == "aoss"


def test_serverless_collection_has_alarms_like_the_domains(serverless: Synth) -> None:
    """Item 2: failing requests, slow searches and capacity, each to the alert topic."""
    alarms = {a["MetricName"]: a for a in serverless.props("AWS::CloudWatch::Alarm") if "MetricName" in a}
    for name in ("SearchRequestErrors", "IngestionRequestErrors", "IngestionDocumentErrors"):
        alarm = alarms[name]
        assert alarm["Namespace"] == "AWS/AOSS" and alarm["Threshold"] == 0
        dims = {d["Name"] for d in alarm["Dimensions"]}
        assert dims == {"CollectionId", "CollectionName", "ClientId"}
        assert alarm["AlarmActions"]
    assert alarms["SearchLatency"]["Threshold"] == 1000
    for name in ("SearchOCU", "IndexingOCU"):
        assert alarms[name]["Threshold"] == 8 and [d["Name"] for d in alarms[name]["Dimensions"]] == [
            "ClientId"
        ]
    assert "ClusterStatus.red" not in alarms  # no domain, no domain alarms
