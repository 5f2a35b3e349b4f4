"""``memstack opensearch reindex``: move the OpenSearch store to a new index version behind its alias.

An upgrade that changes the index mapping (a new field, another k-NN engine)
runs this once: the current template is put, ``<alias>-v<N+1>`` is created
and filled server-side, and the alias moves in one atomic ``_aliases`` call,
so searches never see a half-built index. Run it as an identity mapped to
the ``memstack_maintenance`` role (docs/operations.md).
"""

from __future__ import annotations

from typing import Annotated

import typer

from memstack.cli.app import UserError, console, print_json, settings_from_cli

opensearch_app = typer.Typer(help="Maintenance of the opensearch store backend.", no_args_is_help=True)


@opensearch_app.command("reindex")
def reindex(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Copy every memory into a new index version and point the alias at it."""
    from memstack.adapters.opensearch.store import OpenSearchMemoryStore

    settings = settings_from_cli()
    if settings.store_backend != "opensearch":
        raise UserError("MEMSTACK_STORE_BACKEND is not opensearch: there is no index to rebuild")
    store = OpenSearchMemoryStore.from_settings(settings)
    try:
        new = store.reindex()
    finally:
        store.close()
    if as_json:
        print_json({"alias": settings.opensearch.index, "index": new})
    else:
        console.print(f"{settings.opensearch.index} now points at {new}")


def register(app: typer.Typer) -> None:
    app.add_typer(opensearch_app, name="opensearch")
