"""Import every Lambda handler from a built layer alone, as Lambda would: proof the layer's trims are safe.

``tests/infra/test_layer_contents.py`` imports the handlers from this checkout's
virtualenv with the packages the layer leaves out blocked; this imports them from
the built layer itself, so whatever ``scripts/build_layer.py`` removed (a test
module, a ``.dist-info`` file, a subpackage of a dependency) is really absent.
The Lambda layer is built for arm64, whose numpy cannot load here, so this checks
the same layer built for this machine (``build_layer.py --this-machine``: the same
pins, the same trims, this architecture's wheels).

Each handler is imported in a fresh Python 3.12 (the functions' runtime) started
with ``-I -S`` (no site-packages, no user paths, no ``PYTHON*`` variables), whose
``sys.path`` holds only the handler's directory, the layer's ``python`` directory
and the boto3 / botocore / s3transfer the Lambda runtime ships (installed at the
lock's pins into ``build/lambda-runtime``), with the environment the small tier's
stack gives that function. It then imports the OpenSearch adapter (the medium and
large tiers), checks that every module loaded came from those directories or the
standard library, and with the API function runs one search on the embedded store
(numpy's linear algebra, the text index, the retrieval stages) from the layer.

Usage: ``python scripts/check_layer.py [--build]`` (``--build`` first builds the
layer for this machine); exits non-zero and says which handler failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.build_layer import RUNTIME_PROVIDED, find_python  # noqa: E402

LAYER = ROOT / "build" / "layer-this-machine"
RUNTIME = ROOT / "build" / "lambda-runtime"
PIP_INSTALL = (sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade")

#: run in the fresh interpreter: argv = handler dir, layer site, runtime dir, whether to search
_PROBE = """
import json, sys, sysconfig
handler_dir, site, runtime, search = sys.argv[1:5]
sys.path[:0] = [handler_dir, site, runtime]
import handler
import memstack.adapters.opensearch.store, memstack.adapters.opensearch.client
allowed = (handler_dir, site, runtime, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
strays = sorted(
    name for name, module in list(sys.modules.items())
    if getattr(module, "__file__", None) and not module.__file__.startswith(allowed)
)
hits = None
if search == "yes":
    import os, tempfile
    from memstack.factory import build_service
    from memstack.models import Message
    from memstack.settings import load_settings
    from memstack.domain.retrieval.types import SearchRequest
    for name in [n for n in os.environ if n.startswith("MEMSTACK_")]:
        del os.environ[name]  # the laptop's defaults: the embedded store, offline extraction
    with tempfile.TemporaryDirectory() as data:
        service = build_service(load_settings(data_dir=data, embedder="hashing"))
        turns = ["I moved to Lisbon last spring", "My dog Biscuit loves the beach", "I work as a nurse"]
        service.add("t1", "u1", [Message(content=text) for text in turns], sync=True)
        found = service.search(SearchRequest("t1", "u1", "where do I live now", top_k=3))
        hits = [hit.record.content for hit in found.hits]
        service.close()
print(json.dumps({"modules": len(sys.modules), "strays": strays, "hits": hits}))
"""


def install_runtime(requirements: Path = ROOT / "requirements-layer.txt") -> Path:
    """boto3, botocore and s3transfer at the lock's pins: what the Lambda runtime provides."""
    pins = [
        line.split("#", 1)[0].strip()
        for line in requirements.read_text().splitlines()
        if line.split("==", 1)[0].strip().lower() in RUNTIME_PROVIDED
    ]
    marker = RUNTIME / ".pins"
    if not (marker.exists() and marker.read_text() == "\n".join(pins)):
        subprocess.run(
            [*PIP_INSTALL, "--target", str(RUNTIME), *pins],
            check=True,
        )
        marker.write_text("\n".join(pins))
    return RUNTIME


def check(function: str, python: Path, site: Path, runtime: Path, search: bool) -> dict[str, object]:
    from memstack.bench.coldstart import lambda_environment

    env = {"PATH": os.environ.get("PATH", ""), **lambda_environment(function)}
    handler_dir = ROOT / "lambdas" / function
    result = subprocess.run(
        [
            str(python),
            "-I",
            "-S",
            "-c",
            _PROBE,
            str(handler_dir),
            str(site),
            str(runtime),
            "yes" if search else "no",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{function}: the handler does not import from {site}:\n{result.stderr[-3000:]}")
    report: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    if report["strays"]:
        raise SystemExit(f"{function}: modules from outside the layer and the runtime: {report['strays']}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true", help="build the layer for this machine first")
    parser.add_argument("--layer", type=Path, default=LAYER)
    args = parser.parse_args(argv)
    if args.build:
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "build_layer.py"), "--this-machine"], check=True
        )
    python = find_python()
    if python is None:
        raise SystemExit("no Python 3.12 on this machine (the functions' runtime): install python3.12")
    site = args.layer / "python"
    if not (site / "memstack").is_dir():
        raise SystemExit(f"no layer at {args.layer}: run with --build")
    runtime = install_runtime()
    for function in sorted(p.parent.name for p in (ROOT / "lambdas").glob("*/handler.py")):
        report = check(function, python, site, runtime, search=function == "api")
        hits = f", search: {report['hits']}" if report["hits"] is not None else ""
        print(f"{function}: imports from the layer alone ({report['modules']} modules){hits}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
