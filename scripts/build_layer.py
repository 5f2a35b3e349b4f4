"""Build the ``memstack`` Lambda layer into ``build/layer/python`` without Docker.

pip resolves the runtime pins for the Lambda platform (arm64, CPython 3.12,
binary wheels only), so the layer matches the functions' runtime and
architecture no matter what machine runs the build. Left out on purpose:

- ``requirements-local.txt`` (torch, sentence-transformers): laptop-only; in
  AWS the embedder is Bedrock.
- boto3 / botocore / s3transfer: the Lambda Python runtime ships them, and
  they are the bulk of the layer otherwise.

The wheels are downloaded once into ``build/wheels/<hash of the pins>`` and
installed from there with ``--no-index``, so rebuilding after a code change
needs no network.

Usage: ``python scripts/build_layer.py`` (or ``make layer``). Prints the
layer's unzipped and zipped size; the zip is written next to it as
``build/layer.zip`` only to measure what Lambda will receive.
"""

from __future__ import annotations

import argparse
import hashlib
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


def layer_requirements(requirements: Path) -> list[str]:
    """The runtime pins, without nested ``-r`` includes (laptop-only) and runtime-provided packages."""
    pins = []
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name = line.split("==", 1)[0].split("[", 1)[0].strip().lower()
        if name in RUNTIME_PROVIDED:
            continue
        pins.append(line)
    return pins


def _platform_args() -> list[str]:
    return [
        *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
        "--only-binary=:all:",
        "--python-version",
        PYTHON_VERSION,
        "--implementation",
        "cp",
    ]


def download_wheels(pins: list[str], cache_root: Path) -> Path:
    """Fetch the Lambda-platform wheels once per set of pins; later builds (code changes) run offline."""
    key = hashlib.sha256("\n".join([*pins, *PLATFORMS, PYTHON_VERSION]).encode()).hexdigest()[:16]
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
                "--dest",
                str(cache),
                *_platform_args(),
                *pins,
            ],
            check=True,
        )
        done.touch()
    return cache


def pip_install(target: Path, args: list[str], wheels: Path | None = None) -> None:
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
        *_platform_args(),
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
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "layer")
    parser.add_argument("--requirements", type=Path, default=ROOT / "requirements.txt")
    parser.add_argument(
        "--wheel-cache",
        type=Path,
        default=ROOT / "build" / "wheels",
        help="downloaded wheels, reused while the pins are unchanged",
    )
    args = parser.parse_args(argv)

    out: Path = args.out
    if out.exists():
        shutil.rmtree(out)
    site = out / "python"  # Lambda puts /opt/python on sys.path
    site.mkdir(parents=True)
    pins = layer_requirements(args.requirements)
    wheels = download_wheels(pins, args.wheel_cache)
    pip_install(site, pins, wheels)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = build_package_wheel(Path(tmp))
        pip_install(site, ["--no-deps", str(wheel)])
    remove_runtime_provided(site)
    strip_caches(site)

    zipped = zip_dir(out, out.parent / "layer.zip")
    print(f"layer: {out} unzipped {dir_size(out) / 1e6:.1f} MB, zipped {zipped / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
