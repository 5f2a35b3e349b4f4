"""``memstack config show|set|patch``: a tenant's configuration (custom categories, extraction instructions).

The same document as ``GET/PUT/PATCH /v1/config``, on the store this machine's
settings name. ``set`` replaces it with a JSON file; ``patch`` merges a JSON
file or literal into it (RFC 7386: ``null`` resets a key).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from memstack.cli.app import UserError, open_service, print_json, settings_from_cli, tenant_or_default
from memstack.domain.tenant.configs import VersionedConfig

config_app = typer.Typer(
    help="A tenant's configuration: custom categories, extraction instructions and webhooks (JSON).",
    no_args_is_help=True,
)

Tenant = Annotated[str | None, typer.Option(help="the tenant (default: MEMSTACK_DEFAULT_TENANT)")]
IfVersion = Annotated[
    int | None, typer.Option("--if-version", min=0, help="refuse unless the configuration is at this version")
]


def _document(source: str) -> Any:
    """JSON from a file, from stdin (``-``), or given literally (``'{"categories": ...}'``)."""
    if source == "-":
        text = sys.stdin.read()
    elif source.lstrip().startswith("{"):
        text = source
    else:
        path = Path(source)
        if not path.is_file():
            raise UserError(f"{source}: no such file (give a JSON file, '-' for stdin, or a JSON object)")
        text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{source if source != '-' else 'stdin'} is not JSON: {exc}") from exc


def _show(versioned: VersionedConfig) -> None:
    print_json(
        {
            "config": versioned.config.public(),
            "version": versioned.version,
            "updated_at": versioned.updated_at.isoformat() if versioned.updated_at else None,
        }
    )


@config_app.command("show")
def show(tenant: Tenant = None) -> None:
    """Print the tenant's configuration with every default filled in, and its version."""
    settings = settings_from_cli()
    with open_service(settings) as service:
        _show(service.tenant_configs.read(tenant_or_default(tenant, settings)))


def _write(source: str, tenant: str | None, if_version: int | None, *, merge: bool) -> None:
    settings = settings_from_cli()
    document = _document(source)
    with open_service(settings) as service:
        t, now = tenant_or_default(tenant, settings), datetime.now(UTC)
        write = service.tenant_configs.patch if merge else service.tenant_configs.replace
        _show(write(t, document, now, if_version=if_version))


@config_app.command("set")
def replace(
    source: Annotated[str, typer.Argument(help="a JSON file, '-' for stdin, or a JSON object")],
    tenant: Tenant = None,
    if_version: IfVersion = None,
) -> None:
    """Replace the whole configuration (a section left out returns to its defaults)."""
    _write(source, tenant, if_version, merge=False)


@config_app.command("patch")
def patch(
    source: Annotated[str, typer.Argument(help="a JSON merge patch: file, '-' for stdin, or a JSON object")],
    tenant: Tenant = None,
    if_version: IfVersion = None,
) -> None:
    """Merge changes into the configuration (objects merge, null resets a key, lists replace)."""
    _write(source, tenant, if_version, merge=True)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
