"""Build the ``memstack`` Lambda layer into ``build/layer/python`` without Docker.

The layer is the ``aws`` and ``opensearch`` extras of pyproject.toml, as locked
for the Lambda platform (arm64, CPython 3.12, binary wheels only) in
``requirements-layer.txt`` (``make lock``), so the layer matches the functions'
runtime and architecture no matter what machine runs the build. Left out on purpose:

- the ``local`` and ``mpnet`` extras (the offline embedders' tokenizer and
  weights reader): laptop-only; in AWS the embedder is Bedrock.
- boto3 / botocore / s3transfer: the Lambda Python runtime ships them, and
  they are the bulk of the layer otherwise.
- typer, rich, waitress (the ``server`` extra): the command line and ``memstack
  serve`` use them; no handler imports them (``tests/infra`` checks the handlers
  import without them), and the layer's extras do not ask for them. With them
  go memstack's own command-line packages (``memstack.cli``, which cannot
  import without typer; ``memstack.bench`` and ``memstack.evaluation``, which
  run from a checkout) and its caller side (``memstack.client`` and
  ``memstack.integrations``: they run in the caller's agent, and the stack
  serves no MCP): 0.5 MB of the zip.
- opensearch-protobufs, grpcio, protobuf: opensearch-py 3 declares them for a
  gRPC transport it does not import; they were 22 MB of the layer. The same
  test imports the handlers and the OpenSearch adapter without them.
- dateparser's translation data for every language but English: memstack
  always parses with ``languages=["en"]`` and dateparser imports a language's
  module only when asked for it (2.6 MB; ``tests/infra`` parses the temporal
  test phrases with the other languages blocked).
- snowballstemmer's stemmers of every language but English: memstack loads
  its English module alone, without the package's ``__init__`` (which imports
  all 35; ``domain/text.py``), so the others are never imported (``tests/infra``
  stems with only what the layer keeps).
- the packages' own test suites (``tests`` directories, numpy's are 17 MB),
  type stubs (``.pyi``) and numpy's C headers: nothing imports them at run time.
- what no module of the layer imports (``NEVER_REACHED``): numpy's test extension
  modules, ``numpy.f2py`` (Fortran wrappers), ``numpy.testing`` and its PyInstaller
  hook (numpy imports the two packages only when an attribute names them, and nothing
  does); pydantic's ``v1`` package (imported only for a type with ``__get_validators__``,
  and no package here defines one) and its mypy plugin; dateparser's maintenance
  scripts (``dateparser_scripts``); Cython declarations (``.pxd``).
- of each package's ``.dist-info``, all but what ``importlib.metadata`` reads at run
  time (``METADATA`` for ``version``, ``entry_points.txt``) and the licences: the
  ``RECORD`` of every file, ``WHEEL``, ``INSTALLER``, ``REQUESTED``, ``top_level.txt``.
  With the item above: 29.9 -> 28.5 MB zipped (91.0 -> 86.1 MB unzipped, 3,914 -> 3,610 files).

``python scripts/check_layer.py`` proves the handlers import from a built layer: it
builds the same layer for this machine's architecture (``--this-machine``: its numpy
and pydantic-core can load here) and imports every handler from it alone, with a
Python 3.12 and the Lambda runtime's boto3, no site-packages.

The layer ships compiled bytecode: Lambda's ``/opt`` is read-only, so without
``.pyc`` files every cold start compiles every module again (measured by
``memstack bench coldstart``: ``source`` against ``compiled``). Bytecode is
specific to the Python version, so it is compiled by a Python 3.12 found on
this machine (``python3.12`` on PATH, or pyenv's); without one the layer is
built without it and the build says so. ``unchecked-hash`` pyc files are used
as they are, whatever the files' times after Lambda unpacks the layer.

The wheels are downloaded once into ``build/wheels/<hash of the pins>`` and
installed from there with ``--no-index --no-deps`` (the lock holds every
dependency), so rebuilding after a code change needs no network.

Usage: ``python scripts/build_layer.py`` (or ``make layer``). Prints the
layer's unzipped and zipped size; the zip is written next to it as
``build/layer.zip`` only to measure what Lambda will receive.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Must match stacks/constructs/functions.py (runtime and architecture).
PYTHON_VERSION = "3.12"
PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
# Provided by the Lambda runtime; installing them again only bloats the layer.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer")
# The command line and the local server (the `server` extra): no Lambda handler imports them.
CLI_ONLY = ("typer", "rich", "waitress")
# memstack's packages that only the command line (the benchmarks, the evaluation harness) or
# the caller's agent (the HTTP client, the framework integrations) runs.
CLI_ONLY_MEMSTACK = (
    "memstack.cli",
    "memstack.bench",
    "memstack.evaluation",
    "memstack.client",
    "memstack.integrations",
)
# In the lock as opensearch-py's dependencies, never imported by anything the layer runs: not installed.
NEVER_IMPORTED = ("opensearch-protobufs", "grpcio", "protobuf")
# dateparser's per-language modules; memstack parses dates in these languages only.
DATE_LANGUAGES_KEPT = ("en",)
DATE_TRANSLATIONS = Path("dateparser") / "data" / "date_translation_data"
# snowballstemmer's per-language modules (``<language>_stemmer.py``); memstack stems these only.
STEMMERS_KEPT = ("english",)
DEFAULT_OUT = ROOT / "build" / "layer"
# Paths under the layer's site that no module it runs imports (the module docstring says why each).
NEVER_REACHED = (
    "numpy/f2py",
    "numpy/testing",
    "numpy/_pyinstaller",
    "numpy/_core/_multiarray_tests.*",
    "numpy/_core/_operand_flag_tests.*",
    "numpy/_core/_rational_tests.*",
    "numpy/_core/_simd.*",
    "numpy/_core/_struct_ufunc_tests.*",
    "numpy/_core/_umath_tests.*",
    "pydantic/v1",
    "pydantic/mypy.py",
    "dateparser_scripts",
    "**/*.pxd",
)
# What importlib.metadata reads of a .dist-info at run time (version, entry points), and the licences.
DIST_INFO_KEPT = ("METADATA", "entry_points.txt", "licenses", "LICENSE*", "COPYING*", "NOTICE*", "AUTHORS*")


def layer_requirements(requirements: Path) -> list[str]:
    """The lock's pins, without options or includes, runtime-provided or never-imported packages."""
    pins = []
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name = line.split("==", 1)[0].split("[", 1)[0].strip().lower()
        if name in RUNTIME_PROVIDED or name in CLI_ONLY or name in NEVER_IMPORTED:
            continue
        pins.append(line)
    return pins


def this_machine() -> tuple[str, ...]:
    """The wheel platforms of this machine's architecture (``--this-machine``)."""
    return tuple(f"{tag}_{platform.machine()}" for tag in ("manylinux2014", "manylinux_2_28"))


def _platform_args(platforms: tuple[str, ...]) -> list[str]:
    return [
        *(arg for platform in platforms for arg in ("--platform", platform)),
        "--only-binary=:all:",
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
    ]


def download_wheels(pins: list[str], cache_root: Path, platforms: tuple[str, ...] = PLATFORMS) -> Path:
    """Fetch the Lambda-platform wheels once per set of pins; later builds (code changes) run offline."""
    key = hashlib.sha256("\n".join([*pins, *platforms, PYTHON_VERSION]).encode()).hexdigest()[:16]
    cache = cache_root / key
    done = cache / ".complete"
    if not done.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--dest",
                str(cache),
                *_platform_args(platforms),
                *pins,
            ],
            check=True,
        )
        done.touch()
    return cache


def pip_install(
    target: Path, args: list[str], wheels: Path | None = None, platforms: tuple[str, ...] = PLATFORMS
) -> None:
    offline = ["--no-index", "--find-links", str(wheels)] if wheels else []
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--target",
        str(target),
        *_platform_args(platforms),
        *offline,
        "--upgrade",
        *args,
    ]
    subprocess.run(cmd, check=True)


def remove_runtime_provided(site: Path) -> None:
    for entry in site.iterdir():
        base = (
            entry.name.split("-", 1)[0].lower() if entry.name.endswith(".dist-info") else entry.name.lower()
        )
        if base in RUNTIME_PROVIDED:
            shutil.rmtree(entry)


def strip_caches(site: Path) -> None:
    for cache in site.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def strip_test_suites(site: Path) -> None:
    """What only building or testing the packages uses: their tests, type stubs, numpy's C headers."""
    for tests in sorted(site.glob("*/**/tests"), key=lambda p: len(p.parts)):
        if tests.is_dir() and not tests.name.endswith(".dist-info"):
            shutil.rmtree(tests, ignore_errors=True)
    for stub in site.rglob("*.pyi"):
        stub.unlink()
    shutil.rmtree(site / "numpy" / "_core" / "include", ignore_errors=True)


def strip_never_reached(site: Path, paths: tuple[str, ...] = NEVER_REACHED) -> None:
    """Remove what no module of the layer imports (``NEVER_REACHED``, globs under ``site``)."""
    for pattern in paths:
        for path in sorted(site.glob(pattern), key=lambda p: -len(p.parts)):
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()


def slim_dist_info(site: Path, kept: tuple[str, ...] = DIST_INFO_KEPT) -> None:
    """Each ``.dist-info``: only what ``importlib.metadata`` reads at run time, and the licences."""
    for info in site.glob("*.dist-info"):
        for entry in info.iterdir():
            if any(entry.match(pattern) for pattern in kept):
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def strip_command_line(site: Path) -> None:
    """memstack's command-line and caller-side packages (``CLI_ONLY_MEMSTACK``): no handler imports them."""
    for package in CLI_ONLY_MEMSTACK:
        shutil.rmtree(site.joinpath(*package.split(".")))


def keep_date_languages(site: Path, kept: tuple[str, ...] = DATE_LANGUAGES_KEPT) -> None:
    """Drop dateparser's translation modules of languages memstack never parses in."""
    for module in (site / DATE_TRANSLATIONS).glob("*.py"):
        if module.stem != "__init__" and module.stem not in kept:
            module.unlink()


def keep_stemmers(site: Path, kept: tuple[str, ...] = STEMMERS_KEPT) -> None:
    """Drop snowballstemmer's stemmers of languages memstack never stems (its helpers stay)."""
    for module in (site / "snowballstemmer").glob("*_stemmer.py"):
        if module.stem.removesuffix("_stemmer") not in kept:
            module.unlink()


def find_python(version: str = PYTHON_VERSION) -> Path | None:
    """A working interpreter of the runtime's version, to compile the layer's bytecode with."""
    pyenv = Path.home() / ".pyenv" / "versions"
    candidates = (
        sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True) if pyenv.exists() else []
    )
    on_path = shutil.which(f"python{version}")
    for candidate in [*candidates, *([Path(on_path)] if on_path else [])]:
        # A pyenv shim for a version that is not selected exits with an error: try each.
        probe = subprocess.run(
            [str(candidate), "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(int(x) for x in version.split("."))):
            return candidate
    return None


def compile_bytecode(site: Path) -> bool:
    """Compile every module for the runtime's Python; False (and a warning) when none is here."""
    python = find_python()
    if python is None:
        print(
            f"warning: no Python {PYTHON_VERSION} on this machine: the layer ships without bytecode "
            "and every cold start compiles its modules (install python3.12 to fix)",
            file=sys.stderr,
        )
        return False
    subprocess.run(
        [
            str(python),
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(site),
        ],
        check=True,
    )
    return True


def build_package_wheel(dest: Path) -> Path:
    """A wheel of the memstack package itself (pure Python, so any platform)."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(dest),
            str(ROOT),
        ],
        check=True,
    )
    return next(dest.glob("memstack-*.whl"))


def zip_dir(src: Path, dest: Path) -> int:
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(src.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(src))
    return dest.stat().st_size


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--requirements", type=Path, default=ROOT / "requirements-layer.txt")
    parser.add_argument(
        "--wheel-cache",
        type=Path,
        default=ROOT / "build" / "wheels",
        help="downloaded wheels, reused while the pins are unchanged",
    )
    parser.add_argument(
        "--this-machine",
        action="store_true",
        help="the same layer for this machine's architecture, to import the handlers from here "
        "(scripts/check_layer.py); written to build/layer-this-machine unless --out says",
    )
    args = parser.parse_args(argv)

    platforms = this_machine() if args.this_machine else PLATFORMS
    out: Path = (
        ROOT / "build" / "layer-this-machine" if args.this_machine and args.out == DEFAULT_OUT else args.out
    )
    if out.exists():
        shutil.rmtree(out)
    site = out / "python"  # Lambda puts /opt/python on sys.path
    site.mkdir(parents=True)
    pins = layer_requirements(args.requirements)
    wheels = download_wheels(pins, args.wheel_cache, platforms)
    pip_install(site, ["--no-deps", *pins], wheels, platforms)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_package_wheel(Path(tmp))
        pip_install(site, ["--no-deps", str(wheel)], platforms=platforms)
    remove_runtime_provided(site)
    strip_test_suites(site)
    strip_command_line(site)
    keep_date_languages(site)
    keep_stemmers(site)
    strip_never_reached(site)
    slim_dist_info(site)
    strip_caches(site)
    compiled = compile_bytecode(site)

    zipped = zip_dir(out, out.with_suffix(".zip"))
    bytecode = f"with Python {PYTHON_VERSION} bytecode" if compiled else "without bytecode"
    print(f"layer: {out} unzipped {dir_size(out) / 1e6:.1f} MB, zipped {zipped / 1e6:.1f} MB, {bytecode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
