"""Which settings a piece of code reads: a ``Settings`` that records every field it is asked for.

``recording()`` swaps it in for the one ``load_settings`` builds, so a
handler run from import through its factory path to the end of an
invocation leaves behind the exact ``MEMSTACK_*`` names it depends on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from memstack import settings as settings_module
from memstack.settings import Settings

_reads: set[str] = set()


class RecordingSettings(Settings):
    def __getattribute__(self, name: str) -> Any:
        if name in Settings.model_fields:
            _reads.add(name)
        return super().__getattribute__(name)


@contextmanager
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """The names read while inside, as ``MEMSTACK_<FIELD>``; ``get_settings`` starts cold."""
    found: set[str] = set()
    _reads.clear()
    with monkeypatch.context() as patch:
        patch.setattr(settings_module, "Settings", RecordingSettings)
        settings_module.get_settings.cache_clear()
        try:
            yield found
        finally:
            settings_module.get_settings.cache_clear()
            found.update(f"MEMSTACK_{name.upper()}" for name in _reads)
