"""The search backend of the medium and large tiers: a managed OpenSearch domain, or a serverless collection.

Managed domain: encryption at rest, node-to-node encryption, HTTPS only with
TLS 1.2+, fine-grained access control (the data-plane Lambda roles are
mapped in by the custom resource in stacks/handlers/opensearch_role_mapping,
with exactly the permissions the adapter's calls need), zone awareness, dedicated
masters when the tier asks for them, application/slow/audit logs published
to CloudWatch. Serverless (``opensearch_serverless=true``): a VECTORSEARCH
collection with its encryption, network and data-access policies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from aws_cdk import CustomResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchserverless as aoss
from aws_cdk import aws_opensearchservice as opensearch
from constructs import Construct
from memstack.adapters.opensearch.permissions import Use, collection_rules, domain_role

from stacks.config import StackConfig
from stacks.constructs.functions import retention

ENGINE_VERSION = opensearch.EngineVersion.OPENSEARCH_2_19
# Every index the adapters create (settings.opensearch.index defaults to "memstack-memories").
INDEX_PATTERN = "memstack-*"
HANDLERS = Path(__file__).resolve().parent.parent / "handlers"
#: the fine-grained access control roles: the functions', and the operators' who reindex
APP_ROLE = "memstack_app"
MAINTENANCE_ROLE = "memstack_maintenance"


def domain_role_property(name: str, use: Use, backend_roles: list[str]) -> dict[str, Any]:
    """One entry of the role-mapping custom resource's ``Roles``: derived from the store's calls."""
    body = domain_role(use, INDEX_PATTERN)
    permissions = cast("list[dict[str, Any]]", body["index_permissions"])
    [index] = permissions
    return {
        "Name": name,
        "ClusterPermissions": body["cluster_permissions"],
        "IndexPatterns": index["index_patterns"],
        "IndexPermissions": index["allowed_actions"],
        "BackendRoles": backend_roles,
    }


class SearchBackend(Construct):
    """What the rest of the stack needs from either flavour."""

    endpoint: str
    service: str  # the SigV4 service name the adapter signs for: "es" or "aoss"

    def grant_read_write(self, fn: lambda_.Function) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Called once every data-plane function has been granted (policies that list the roles)."""


class SearchDomain(SearchBackend):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig) -> None:
        super().__init__(scope, cid)
        self.service = "es"
        self._roles: list[iam.IRole] = []
        self._maintainers = list(config.opensearch_maintenance_role_arns)
        log_retention = retention(config.log_retention_days)
        self._log_retention = log_retention

        def log_group(name: str) -> logs.LogGroup:
            return logs.LogGroup(self, name, retention=log_retention, removal_policy=RemovalPolicy.DESTROY)

        # The master user of fine-grained access control; only it may edit role mappings.
        self.admin_role = iam.Role(
            self,
            "AdminRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="OpenSearch fine-grained access control master user (role-mapping function)",
        )
        dedicated_masters = config.opensearch_master_nodes > 0
        self.domain = opensearch.Domain(
            self,
            "Domain",
            version=ENGINE_VERSION,
            capacity=opensearch.CapacityConfig(
                data_nodes=config.opensearch_data_nodes,
                data_node_instance_type=config.opensearch_instance_type,
                master_nodes=config.opensearch_master_nodes if dedicated_masters else None,
                master_node_instance_type=config.opensearch_master_instance_type
                if dedicated_masters
                else None,
                multi_az_with_standby_enabled=False,
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(
                enabled=True, availability_zone_count=config.opensearch_zones
            ),
            ebs=opensearch.EbsOptions(
                volume_size=config.opensearch_volume_gb, volume_type=ec2.EbsDeviceVolumeType.GP3
            ),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            fine_grained_access_control=opensearch.AdvancedSecurityOptions(
                master_user_arn=self.admin_role.role_arn
            ),
            logging=opensearch.LoggingOptions(
                app_log_enabled=True,
                app_log_group=log_group("AppLogs"),
                slow_search_log_enabled=True,
                slow_search_log_group=log_group("SlowSearchLogs"),
                slow_index_log_enabled=True,
                slow_index_log_group=log_group("SlowIndexLogs"),
                audit_log_enabled=True,
                audit_log_group=log_group("AuditLogs"),
            ),
            enable_auto_software_update=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.endpoint = f"https://{self.domain.domain_endpoint}"
        self.volume_gb = config.opensearch_volume_gb
        self.domain.grant_read_write(self.admin_role)

    def grant_read_write(self, fn: lambda_.Function) -> None:
        self.domain.grant_read_write(fn)
        if fn.role is not None:
            self._roles.append(fn.role)

    @property
    def mapped_roles(self) -> list[iam.IRole]:
        return list(self._roles)

    def finish(self) -> None:
        """Map the granted roles into fine-grained access control (a custom resource run as master user)."""
        log_group = logs.LogGroup(
            self, "RoleMappingLogs", retention=self._log_retention, removal_policy=RemovalPolicy.DESTROY
        )
        fn = lambda_.Function(
            self,
            "RoleMappingFunction",
            description="maps the memstack Lambda roles into OpenSearch fine-grained access control",
            runtime=lambda_.Runtime.PYTHON_3_12,
            architecture=lambda_.Architecture.ARM_64,
            handler="index.handler",
            code=lambda_.Code.from_asset(
                str(HANDLERS / "opensearch_role_mapping"), exclude=["__pycache__", "*.pyc"]
            ),
            role=self.admin_role,
            timeout=Duration.minutes(10),
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
        )
        log_group.grant_write(self.admin_role)
        self.role_mapping = CustomResource(
            self,
            "RoleMapping",
            service_token=fn.function_arn,
            resource_type="Custom::OpenSearchRoleMapping",
            properties={
                "Endpoint": self.endpoint,
                "Roles": [
                    domain_role_property(APP_ROLE, "runtime", [r.role_arn for r in self._roles]),
                    domain_role_property(MAINTENANCE_ROLE, "maintenance", self._maintainers),
                ],
            },
        )
        self.role_mapping.node.add_dependency(self.domain)
        self.role_mapping_function = fn


class SearchCollection(SearchBackend):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig) -> None:
        super().__init__(scope, cid)
        self.service = "aoss"
        self._roles: list[iam.IRole] = []
        self._maintainers = list(config.opensearch_maintenance_role_arns)
        self.name = f"{config.service_name}-{config.tier}"[:32]
        encryption = aoss.CfnSecurityPolicy(
            self,
            "Encryption",
            name=f"{self.name}-enc"[:32],
            type="encryption",
            policy=json.dumps(
                {
                    "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{self.name}"]}],
                    "AWSOwnedKey": True,
                }
            ),
        )
        network = aoss.CfnSecurityPolicy(
            self,
            "Network",
            name=f"{self.name}-net"[:32],
            type="network",
            # Public endpoint, but every request is SigV4-signed and checked against the data-access policy.
            policy=json.dumps(
                [
                    {
                        "Rules": [{"ResourceType": "collection", "Resource": [f"collection/{self.name}"]}],
                        "AllowFromPublic": True,
                    }
                ]
            ),
        )
        self.collection = aoss.CfnCollection(
            self,
            "Collection",
            name=self.name,
            type="VECTORSEARCH",
            standby_replicas="ENABLED",
            description="memstack memories (BM25 + k-NN)",
        )
        self.collection.node.add_dependency(encryption)
        self.collection.node.add_dependency(network)
        self.endpoint = self.collection.attr_collection_endpoint

    def grant_read_write(self, fn: lambda_.Function) -> None:
        fn.add_to_role_policy(
            iam.PolicyStatement(
                actions=["aoss:APIAccessAll"],
                resources=[self.collection.attr_arn],
            )
        )
        if fn.role is not None:
            self._roles.append(fn.role)

    def finish(self) -> None:
        """The data access policy: the store's calls' permissions (permissions.CALLS), per principal."""
        policy = [
            {"Rules": collection_rules("runtime", self.name), "Principal": [r.role_arn for r in self._roles]}
        ]
        if self._maintainers:
            policy.append(
                {"Rules": collection_rules("maintenance", self.name), "Principal": self._maintainers}
            )
        aoss.CfnAccessPolicy(
            self,
            "DataAccess",
            name=f"{self.name}-data"[:32],
            type="data",
            policy=Stack.of(self).to_json_string(policy),
        )


def build_search(scope: Construct, cid: str, config: StackConfig) -> SearchBackend | None:
    if not config.uses_opensearch:
        return None
    if config.opensearch_serverless:
        return SearchCollection(scope, cid, config=config)
    return SearchDomain(scope, cid, config=config)
