"""Which ``SqlExecutor`` the settings name: psycopg on a DSN, or the RDS Data API on a cluster."""

from __future__ import annotations

from typing import Any

from memstack.adapters.postgres.executor import SqlExecutor
from memstack.errors import SettingsError
from memstack.settings import Settings

#: set on every direct connection: iterative HNSW scans, and a candidate list
#: about half the ~200 candidates a search asks for, so few iterations are
#: needed (migration 3 makes the same the role's default, which is what Data
#: API sessions get)
SESSION_SETTINGS = {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": "100"}


def build_executor(settings: Settings, rds_data_client: Any | None = None) -> SqlExecutor:
    """The executor, or a ``SettingsError`` naming the variables the choice needs."""
    if settings.postgres.executor == "data-api":
        if not (settings.postgres.cluster_arn and settings.postgres.secret_arn):
            raise SettingsError(
                "MEMSTACK_POSTGRES_EXECUTOR=data-api needs MEMSTACK_POSTGRES_CLUSTER_ARN "
                "and MEMSTACK_POSTGRES_SECRET_ARN"
            )
        from memstack.adapters.postgres.data_api_executor import DataApiExecutor

        return DataApiExecutor(
            settings.postgres.cluster_arn or "",
            settings.postgres.secret_arn or "",
            settings.postgres.database,
            client=rds_data_client,
            region=settings.aws.aws_region,
        )
    if not settings.postgres.dsn:
        raise SettingsError(
            "MEMSTACK_STORE_BACKEND=postgres needs MEMSTACK_POSTGRES_DSN "
            "(or MEMSTACK_POSTGRES_EXECUTOR=data-api with the cluster and secret ARNs)"
        )
    from memstack.adapters.postgres.psycopg_executor import PsycopgExecutor

    return PsycopgExecutor(
        settings.postgres.dsn or "",
        max_size=settings.postgres.pool_size,
        connect_timeout=settings.postgres.connect_timeout,
        session_settings=SESSION_SETTINGS,
    )
