"""``memstack.startup.cold_imports``: a handler's imports run with the collector paused, then frozen."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from memstack.startup import cold_imports

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector")
def test_collection_is_paused_inside_and_what_was_made_is_frozen_after() -> None:
    gc.enable()
    frozen = gc.get_freeze_count()
    with cold_imports():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(made)


@pytest.mark.usefixtures("collector")
def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with cold_imports():
        pass
    assert not gc.isenabled()


def test_every_handler_imports_inside_cold_imports() -> None:
    for handler in sorted(LAMBDAS.glob("*/handler.py")):
        tree = ast.parse(handler.read_text())
        outside = [
            node
            for node in tree.body
            if isinstance(node, ast.ImportFrom | ast.Import)
            and not (
                isinstance(node, ast.ImportFrom)
                and node.module in ("__future__", "typing", "memstack.startup")
            )
        ]
        inside = [
            n
            for n in tree.body
            if isinstance(n, ast.With) and ast.unparse(n.items[0].context_expr) == "cold_imports()"
        ]
        assert not outside and inside, handler
