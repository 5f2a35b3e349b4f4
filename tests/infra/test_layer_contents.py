"""What the Lambda layer leaves out, the handlers never import; what it compiles, it finds a Python for."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from memstack.bench.coldstart import lambda_environment
from memstack.domain.text import stem

from scripts.build_layer import (
    CLI_ONLY,
    CLI_ONLY_MEMSTACK,
    DATE_LANGUAGES_KEPT,
    DATE_TRANSLATIONS,
    DIST_INFO_KEPT,
    NEVER_IMPORTED,
    NEVER_REACHED,
    STEMMERS_KEPT,
    keep_date_languages,
    keep_stemmers,
    layer_requirements,
    slim_dist_info,
    strip_never_reached,
)

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = sorted(p.parent.name for p in (ROOT / "lambdas").glob("*/handler.py"))

#: ``NEVER_REACHED``'s modules and packages, as import names (its ``**/*.pxd`` are no modules)
NEVER_REACHED_MODULES = {
    path.removesuffix(".*").removesuffix(".py").replace("/", ".")
    for path in NEVER_REACHED
    if not path.startswith("**")
}
# What the layer leaves out, as import names: importing any of them raises, as in Lambda.
LEFT_OUT = {*CLI_ONLY, *CLI_ONLY_MEMSTACK, *NEVER_REACHED_MODULES, "grpc", "google.protobuf", "opensearch"}
_BLOCK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in {blocked!r}):
            raise ImportError(f"{{name}} is not in the Lambda layer")
        return None
sys.meta_path.insert(0, Block())
sys.path.insert(0, sys.argv[1])
import handler
import memstack.adapters.opensearch.store, memstack.adapters.opensearch.client  # the medium/large tiers
"""


def test_the_layer_leaves_out_the_command_line_packages() -> None:
    names = {p.split("==")[0].lower() for p in layer_requirements(ROOT / "requirements-layer.txt")}
    assert not names & set(CLI_ONLY) and not names & set(NEVER_IMPORTED)
    assert {"pydantic", "numpy", "aws-lambda-powertools", "threadpoolctl"} <= names


@pytest.mark.parametrize("function", HANDLERS)
def test_every_handler_imports_without_them(function: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTACK_")}
    env.update(lambda_environment(function))
    result = subprocess.run(
        [sys.executable, "-c", _BLOCK.format(blocked=LEFT_OUT), str(ROOT / "lambdas" / function)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]


# The layer keeps dateparser's English data only: every phrase must parse the same with the rest blocked.
_DATES_ENGLISH_ONLY = """
import json, sys
class Block:
    def find_spec(self, name, path=None, target=None):
        prefix = "dateparser.data.date_translation_data."
        if name.startswith(prefix) and name[len(prefix):] not in {kept!r}:
            raise ImportError(f"{{name}} is not in the Lambda layer")
        return None
sys.meta_path.insert(0, Block())
sys.path.insert(0, sys.argv[1])
from tests.infra.test_layer_contents import date_readings
print(json.dumps(date_readings()))
"""
# Absolute forms only (a relative one would depend on when each process runs); the first
# needs dateparser, the last strptime.
_TIMESTAMPS = ("March 3rd, 2024 5pm", "Sat, 02 Mar 2024 10:00:00", "2 Mar 2024", "1:56 pm on 8 May, 2023")


def date_readings() -> list[str | None]:
    from memstack.domain.time.parse import parse_timestamp
    from memstack.domain.time.windows import resolve_window

    from tests.retrieval.test_temporal_expressions import CASES, NEGATIVES, REF

    phrases = [case[0] for case in CASES] + list(NEGATIVES)
    windows = [resolve_window(text, REF) for text in phrases]
    stamps = [parse_timestamp(text, "UTC") for text in _TIMESTAMPS]
    return [w and f"{w.start.isoformat()}/{w.end.isoformat()}" for w in windows] + [
        s.isoformat() for s in stamps
    ]


def test_dates_parse_the_same_with_only_the_layers_date_languages() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _DATES_ENGLISH_ONLY.format(kept=DATE_LANGUAGES_KEPT), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == date_readings()


def test_the_layer_drops_the_other_date_languages(tmp_path: Path) -> None:
    data = tmp_path / DATE_TRANSLATIONS
    data.mkdir(parents=True)
    for name in ("__init__", "en", "fr", "zh-Hant"):
        (data / f"{name}.py").write_text("")
    keep_date_languages(tmp_path)
    assert sorted(p.stem for p in data.glob("*.py")) == ["__init__", "en"]


# The layer keeps snowballstemmer's English stemmer only: memstack stems the same with nothing else.
_STEMS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from memstack.domain import text
stems = [text.stem(w) for w in json.loads(sys.argv[2])]
assert sys.modules["_memstack_snowball_english.english_stemmer"].__file__.startswith(sys.argv[1])
print(json.dumps(stems))
"""


def test_the_layer_keeps_only_the_english_stemmer_and_memstack_stems_the_same(tmp_path: Path) -> None:
    spec = importlib.util.find_spec("snowballstemmer")
    assert spec is not None and spec.submodule_search_locations
    kept = tmp_path / "snowballstemmer"
    shutil.copytree(next(iter(spec.submodule_search_locations)), kept)
    keep_stemmers(tmp_path)
    assert sorted(p.stem for p in kept.glob("*_stemmer.py")) == [f"{lang}_stemmer" for lang in STEMMERS_KEPT]
    words = ["camping", "generously", "relational", "skies", "organization", "hopefulness", "dying"]
    result = subprocess.run(
        [sys.executable, "-c", _STEMS, str(tmp_path), json.dumps(words)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.splitlines()[-1]) == [stem(w) for w in words]


def test_the_never_reached_modules_are_named_as_imports() -> None:
    assert {"numpy.f2py", "numpy._core._simd", "pydantic.v1", "pydantic.mypy", "dateparser_scripts"} <= (
        NEVER_REACHED_MODULES
    )
    assert all(name.replace(".", "").replace("_", "").isalnum() for name in NEVER_REACHED_MODULES)


def test_the_layer_drops_what_nothing_reaches_and_keeps_its_neighbours(tmp_path: Path) -> None:
    kept = ["numpy/_core/_multiarray_umath.cpython-312-aarch64-linux-gnu.so", "numpy/linalg/__init__.py"]
    kept += ["pydantic/main.py", "pydantic/version.py", "numpy/__init__.py"]
    dropped = ["numpy/_core/_simd.cpython-312-aarch64-linux-gnu.so", "numpy/_core/_umath_tests.pyi"]
    dropped += ["numpy/f2py/__init__.py", "pydantic/v1/main.py", "pydantic/mypy.py", "numpy/__init__.pxd"]
    dropped += ["dateparser_scripts/get_cldr_data.py", "numpy/random/c_distributions.pxd"]
    for name in kept + dropped:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    strip_never_reached(tmp_path)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == sorted(kept)


def test_a_dist_info_keeps_what_importlib_metadata_reads_and_its_licences(tmp_path: Path) -> None:
    info = tmp_path / "demo_pkg-1.2.3.dist-info"
    kept = ["METADATA", "entry_points.txt", "licenses/LICENSE.txt", "LICENSE"]
    for name in [*kept, "RECORD", "WHEEL", "INSTALLER", "REQUESTED", "top_level.txt"]:
        (info / name).parent.mkdir(parents=True, exist_ok=True)
        (info / name).write_text("")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text("[demo.plugins]\nfirst = demo_pkg:first\n")
    slim_dist_info(tmp_path)
    assert sorted(str(p.relative_to(info)) for p in info.rglob("*") if p.is_file()) == sorted(kept)
    assert "METADATA" in DIST_INFO_KEPT
    # What the layer's packages ask of importlib.metadata still answers (pydantic: version, entry points).
    found = list(importlib.metadata.distributions(path=[str(tmp_path)]))
    assert [d.version for d in found] == ["1.2.3"]
    assert [ep.name for d in found for ep in d.entry_points if ep.group == "demo.plugins"] == ["first"]
