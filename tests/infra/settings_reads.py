"""Which settings a piece of code reads: a ``Settings`` that records every variable it is asked for.

A section handed out (``settings.retrieval``) is a recording view of it: a
field read through the view, or through one of its properties or methods, or
through a copy made of it (``model_copy``), records that field's variable.

``recording()`` swaps it in for the one ``load_settings`` builds, so a
handler run from import through its factory path to the end of an
invocation leaves behind the exact ``MEMSTACK_*`` names it depends on.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from memstack import settings as settings_module
from memstack.section import Section
from memstack.settings import VARIABLE_OF, Settings

_reads: set[str] = set()


def _read(path: tuple[str, ...], value: Any) -> Any:
    if isinstance(value, Section):
        return RecordingSection(value, path)
    if path in VARIABLE_OF:
        _reads.add(VARIABLE_OF[path])
    return value


class RecordingSection:
    """A section as the code sees it, recording each setting read through it."""

    def __init__(self, section: Section, path: tuple[str, ...]) -> None:
        self._section, self._path = section, path

    def __getattr__(self, name: str) -> Any:
        section = self._section
        if name in type(section).model_fields:
            return _read((*self._path, name), getattr(section, name))
        if name == "model_copy":
            return lambda *a, **kw: RecordingSection(section.model_copy(*a, **kw), self._path)
        static = inspect.getattr_static(type(section), name, None)
        if isinstance(static, property) and static.fget is not None:
            return static.fget(self)  # its reads go through this view
        value = getattr(section, name)
        if inspect.ismethod(value) and not name.startswith("model_"):
            return types.MethodType(value.__func__, self)
        return value


class RecordingSettings(Settings):
    def __getattribute__(self, name: str) -> Any:
        if name in Settings.model_fields:
            return _read((name,), super().__getattribute__(name))
        return super().__getattribute__(name)


@contextmanager
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[str]]:
    """The names read while inside, as ``MEMSTACK_<FIELD>``; ``get_settings`` starts cold."""
    found: set[str] = set()
    # Nested (one handler run between two calls of another): the outer one's reads so far are kept.
    outer = set(_reads)
    _reads.clear()
    with monkeypatch.context() as patch:
        patch.setattr(settings_module, "Settings", RecordingSettings)
        settings_module.get_settings.cache_clear()
        try:
            yield found
        finally:
            settings_module.get_settings.cache_clear()
            found.update(f"MEMSTACK_{name.upper()}" for name in _reads)
            _reads.clear()
            _reads.update(outer)
