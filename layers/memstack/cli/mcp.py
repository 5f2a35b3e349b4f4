"""``memstack mcp``: memstack as an MCP server over stdio (Claude Desktop, IDEs, any MCP host).

By default it serves this machine's store (the embedded backend, or whatever
``MEMSTACK_*`` configures) as tenant ``MEMSTACK_DEFAULT_TENANT``, running
extraction in the background. With ``--url`` it fronts a remote memstack API
instead (an API key, or SigV4 with ``--aws-region``), and the tenant is that
credential's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memstack.cli.app import UserError, checked_user, open_service, settings_from_cli, tenant_or_default
from memstack.cli.serve import background_jobs

if TYPE_CHECKING:
    from memstack.client import MemoryClient
    from memstack.integrations.toolkit import MemoryToolkit


def _remote_toolkit(
    url: str, api_key: str | None, aws_region: str | None, user: str | None, agent: str | None
) -> MemoryToolkit:
    from memstack.client import MemoryClient
    from memstack.integrations.toolkit import MemoryToolkit

    if not api_key and not aws_region:
        raise UserError("--url needs --api-key (memstack serve) or --aws-region (API Gateway, SigV4)")
    client = MemoryClient(url, api_key=api_key, aws_region=aws_region)
    check_credential(client, url)
    return MemoryToolkit(client, user_id=user, agent_id=agent)


def check_credential(client: MemoryClient, url: str) -> None:
    """One authenticated read before serving: a wrong key or URL fails here, not on every tool call."""
    from memstack.client import MemoryApiError

    try:
        client.list_users(limit=1)
    except MemoryApiError as exc:
        if exc.code == "connection_error":
            raise UserError(f"cannot reach the memstack API at {url}: {exc.message}") from None
        if exc.status in (401, 403):
            raise UserError(
                f"the memstack API at {url} refused the credential ({exc.status} {exc.code}: {exc.message}); "
                "check --api-key / MEMSTACK_API_KEY (or --aws-region's credentials)"
            ) from None
        raise UserError(
            f"the memstack API at {url} answered {exc.status} {exc.code}: {exc.message}"
        ) from None


def mcp(
    user: Annotated[
        str | None,
        typer.Option(
            "--user",
            "-u",
            help="the one user the tools act for (MEMSTACK_MCP_USER_ID)",
            callback=checked_user,
        ),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="the agent the tools act as: tags adds, filters reads (MEMSTACK_MCP_AGENT_ID)"
        ),
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="tenant (default: MEMSTACK_DEFAULT_TENANT)")] = None,
    url: Annotated[
        str | None, typer.Option(help="front a remote memstack API instead of this machine's")
    ] = None,
    api_key: Annotated[str | None, typer.Option(envvar="MEMSTACK_API_KEY", help="API key for --url")] = None,
    aws_region: Annotated[
        str | None, typer.Option(help="sign --url requests with SigV4 (API Gateway)")
    ] = None,
) -> None:
    """Serve memstack's memory tools over MCP on stdin/stdout."""
    try:
        from memstack.client.in_process import in_process_client, wsgi_api
        from memstack.integrations.mcp_server import build_mcp_server
        from memstack.integrations.toolkit import MemoryToolkit
    except ImportError as exc:
        raise UserError(
            f"the MCP server needs the MCP SDK ({exc.name}): pip install 'memstack[integrations]'"
        ) from None
    settings = settings_from_cli(mcp_user_id=user, mcp_agent_id=agent)
    if url:
        toolkit = _remote_toolkit(
            url, api_key, aws_region, settings.mcp.mcp_user_id, settings.mcp.mcp_agent_id
        )
        build_mcp_server(toolkit, allow_erase=settings.mcp.mcp_allow_erase).run("stdio")
        return
    with open_service(settings) as service, background_jobs(service):
        api = wsgi_api(service, settings, tenant_or_default(tenant, settings))
        toolkit = MemoryToolkit(
            in_process_client(api), user_id=settings.mcp.mcp_user_id, agent_id=settings.mcp.mcp_agent_id
        )
        try:
            build_mcp_server(toolkit, allow_erase=settings.mcp.mcp_allow_erase).run("stdio")
        finally:
            api.close()


def register(app: typer.Typer) -> None:
    app.command()(mcp)
