"""The ``postgres`` store backend in AWS: Aurora PostgreSQL Serverless v2 + pgvector, over the Data API.

- The functions stay outside any VPC: they call the RDS Data API (HTTPS, IAM
  authorised: ``grant_data_api_access`` gives ``rds-data`` on this cluster and
  read access to its one secret), so there is no NAT gateway and no VPC cold
  start. The cluster sits in isolated subnets of its own VPC (no internet
  route at all) with flow logs.
- The master credentials are generated into Secrets Manager; nothing else
  holds them. ``aurora_secret_rotation`` adds single-user rotation (it needs
  a Secrets Manager VPC endpoint, so it is off by default; see docs/deploy.md).
- Storage encrypted, IAM database authentication on, backups kept
  ``aurora_backup_days``, deletion protection on, logs exported to CloudWatch,
  a non-default port, and Serverless v2 capacity from ``aurora_min_acu``
  (0 pauses the cluster when idle) to ``aurora_max_acu``.
- pgvector is enabled by the adapter's first migration
  (``CREATE EXTENSION vector``), which runs when a function first opens the
  store, or from a laptop with ``memstack migrate``.
- Alarms (ACU utilisation, connections, deadlocks) go to the alert topic and
  onto the dashboard (``widgets``); docs/operations.md says what to do about each.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_rds as rds
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.config import StackConfig
from stacks.constructs.alerts import alarm_name
from stacks.constructs.functions import retention
from stacks.nag import ack

ENGINE_VERSION = rds.AuroraPostgresEngineVersion.VER_17_5  # ships pgvector 0.8
DATABASE_NAME = "memstack"
MASTER_USER = "memstack_admin"
PORT = 5438  # not 5432: cdk-nag RDS11, and nothing connects by port anyway (Data API)
ACU_UTILISATION_PERCENT = 90


class MemoryDatabase(Construct):
    def __init__(self, scope: Construct, cid: str, *, config: StackConfig, topic: sns.ITopic) -> None:
        super().__init__(scope, cid)
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="db", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=24)
            ],
        )
        self.vpc.add_flow_log(
            "FlowLogs",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                logs.LogGroup(
                    self,
                    "FlowLogGroup",
                    retention=retention(config.log_retention_days),
                    removal_policy=RemovalPolicy.DESTROY,
                )
            ),
        )
        cluster_id = f"{config.service_name}-{config.tier}-memories"
        self.cluster = rds.DatabaseCluster(
            self,
            "Cluster",
            engine=rds.DatabaseClusterEngine.aurora_postgres(version=ENGINE_VERSION),
            writer=rds.ClusterInstance.serverless_v2("Writer", auto_minor_version_upgrade=True),
            serverless_v2_min_capacity=config.aurora_min_acu,
            serverless_v2_max_capacity=config.aurora_max_acu,
            serverless_v2_auto_pause_duration=Duration.minutes(config.aurora_auto_pause_minutes)
            if config.aurora_min_acu == 0
            else None,
            vpc=self.vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
            credentials=rds.Credentials.from_generated_secret(MASTER_USER),
            default_database_name=DATABASE_NAME,
            port=PORT,
            enable_data_api=True,
            iam_authentication=True,
            storage_encrypted=True,
            backup=rds.BackupProps(retention=Duration.days(config.aurora_backup_days)),
            deletion_protection=config.aurora_deletion_protection,
            removal_policy=RemovalPolicy.SNAPSHOT,
            cloudwatch_logs_exports=["postgresql"],
            cluster_identifier=cluster_id,
            copy_tags_to_snapshot=True,
        )
        # The log group RDS exports to, made here so it has a retention without
        # CDK's log-retention custom resource (another Lambda with broad rights).
        self.cluster.node.add_dependency(
            logs.LogGroup(
                self,
                "PostgresLogs",
                log_group_name=f"/aws/rds/cluster/{cluster_id}/postgresql",
                retention=retention(config.log_retention_days),
                removal_policy=RemovalPolicy.DESTROY,
            )
        )
        assert self.cluster.secret is not None
        self.secret = self.cluster.secret
        if config.aurora_secret_rotation:
            # Closed endpoint: only the rotation function (which CDK connects to it) may use it.
            endpoint = self.vpc.add_interface_endpoint(
                "SecretsManagerEndpoint",
                service=ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
                open=False,
            )
            self.cluster.add_rotation_single_user(automatically_after=Duration.days(30), endpoint=endpoint)
        self.alarms = self._alarms(config, topic)
        self._acknowledge(config)

    # --------------------------------------------------------------- the functions' side
    def settings(self) -> dict[str, str]:
        """The functions' settings for this database (``postgres_*`` in layers/memstack/settings.py)."""
        return {
            "postgres_executor": "data-api",
            "postgres_cluster_arn": self.cluster.cluster_arn,
            "postgres_secret_arn": self.secret.secret_arn,
            "postgres_database": DATABASE_NAME,
        }

    def grant_data_api(self, grantee: iam.IGrantable) -> None:
        """``rds-data`` calls on this cluster and reading its secret (CDK's grant), nothing more."""
        self.cluster.grant_data_api_access(grantee)

    # ------------------------------------------------------------------------ alarms
    def _alarms(self, config: StackConfig, topic: sns.ITopic) -> list[cw.Alarm]:
        five = Duration.minutes(5)
        specs = [
            (
                "AuroraAcuUtilisation",
                self.cluster.metric_acu_utilization(period=five, statistic="Average"),
                ACU_UTILISATION_PERCENT,
                3,
                f"Aurora at over {ACU_UTILISATION_PERCENT}% of its {config.aurora_max_acu:g} ACU maximum "
                "for 15 minutes: raise aurora_max_acu",
            ),
            (
                "AuroraConnections",
                self.cluster.metric_database_connections(period=five, statistic="Maximum"),
                config.aurora_connections_alarm,
                2,
                f"more than {config.aurora_connections_alarm} database connections",
            ),
            (
                "AuroraDeadlocks",
                self.cluster.metric_deadlocks(period=five, statistic="Sum"),
                0,
                1,
                "deadlocks in the memory database (writes are retried by the callers)",
            ),
        ]
        alarms = []
        for cid, metric, threshold, periods, description in specs:
            alarm = cw.Alarm(
                self,
                cid,
                alarm_name=alarm_name(config, cid),
                metric=metric,
                threshold=threshold,
                evaluation_periods=periods,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
                alarm_description=description,
            )
            alarm.add_alarm_action(actions.SnsAction(topic))
            alarms.append(alarm)
        return alarms

    def widgets(self) -> list[cw.IWidget]:
        five = Duration.minutes(5)
        return [
            cw.GraphWidget(
                title="Aurora capacity (ACU) and utilisation",
                left=[self.cluster.metric_serverless_database_capacity(period=five, statistic="Average")],
                right=[self.cluster.metric_acu_utilization(period=five, statistic="Average")],
                width=12,
            ),
            cw.GraphWidget(
                title="Aurora connections and deadlocks",
                left=[self.cluster.metric_database_connections(period=five, statistic="Maximum")],
                right=[self.cluster.metric_deadlocks(period=five, statistic="Sum")],
                width=12,
            ),
            cw.AlarmStatusWidget(title="Aurora alarms", alarms=self.alarms, width=24),
        ]

    # ---------------------------------------------------------------------- cdk-nag
    def _acknowledge(self, config: StackConfig) -> None:
        if not config.aurora_secret_rotation:
            ack(
                self.cluster,
                "SMG4",
                "rotation needs a rotation function inside the isolated VPC and a Secrets Manager "
                "endpoint there (about $15/month for two zones); off by default, on with "
                "aurora_secret_rotation=true. Only the Data API reads the secret.",
            )
