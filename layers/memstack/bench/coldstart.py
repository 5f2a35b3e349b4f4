"""``memstack bench coldstart``: each Lambda handler's import in a fresh interpreter, and the layer.

Every handler in ``lambdas/*/handler.py`` is imported in a new Python
process, several times, with the environment the small tier's stack gives
that function (``stacks/constructs/environment.py``, from ``cdk.json``; the
resource names are placeholders, nothing is called at import), plus what
the Lambda runtime sets. Without the CDK libraries installed, a hand-written
equivalent is used and the report says so. Two ways:

- ``compiled``: with bytecode, as the layer ships it (``scripts/build_layer.py``
  compiles it; Lambda's ``/opt`` is read-only, so without it every cold start
  compiles every module again);
- ``source`` (with ``source=True``, ``--source``): no bytecode anywhere (an
  empty ``PYTHONPYCACHEPREFIX``, nothing written), as a layer without it
  behaves. Opt-in: it is two thirds of a full run's time (each import compiles
  every module), and a full run of both modes took 23 minutes at load 15.

The **floor**, measured the same way in the same run (between the handlers,
so load drift weighs on both): a fresh interpreter importing only the
libraries every handler's first invocation needs whatever it does: boto3
(every function calls AWS), pydantic (the settings) and Powertools' Logger.
Each handler's ratio to it is the figure that travels between machines and loads.

The interpreter is this machine's, with the packages of this environment at
the layer's pins; the layer itself targets arm64, so it is measured by size.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memstack.bench.stats import machine
from memstack.startup import LIBRARY_ENVIRONMENT

#: the import's wall time, then its CPU time (what it costs an idle core: a loaded machine
#: stretches the first, hardly the second), in milliseconds
_TIMED = (
    "import time; t, c = time.perf_counter(), time.process_time(); {body}; "
    "print(round((time.perf_counter() - t) * 1000, 1), round((time.process_time() - c) * 1000, 1))"
)
_IMPORT = "import sys; sys.path.insert(0, sys.argv[1]); " + _TIMED.format(body="import handler")
#: what the floor imports (see the module's docstring), timed as ``_IMPORT`` times a handler
FLOOR_MODULES = ("boto3", "pydantic", "aws_lambda_powertools.logging")
_FLOOR = _TIMED.format(body="; ".join(f"import {m}" for m in FLOOR_MODULES))


def repository_root() -> Path:
    """The checkout this package runs from (``lambdas/`` and ``build/`` live there)."""
    return Path(__file__).resolve().parents[3]


_RESOURCES = {
    "aws_region": "us-east-1",
    "memories_table": "memstack-memories",
    "stm_table": "memstack-stm",
    "idempotency_table": "memstack-idempotency",
    "extraction_queue_url": "https://sqs.us-east-1.amazonaws.com/000000000000/memstack-extraction",
    "consolidation_queue_url": "https://sqs.us-east-1.amazonaws.com/000000000000/memstack-consolidation",
    "extraction_dlq_url": "https://sqs.us-east-1.amazonaws.com/000000000000/memstack-extraction-dlq",
    "consolidation_dlq_url": "https://sqs.us-east-1.amazonaws.com/000000000000/memstack-consolidation-dlq",
}


def _runtime(function: str) -> dict[str, str]:
    """What the Lambda runtime and the stack's Powertools settings add.

    ``LAMBDA_TASK_ROOT`` (the function's code directory, always set by the runtime) matters:
    without it the X-Ray SDK behind Powertools' Tracer thinks it runs outside Lambda and
    builds a botocore X-Ray client for centralised sampling at import (~30% of the API
    handler's import on this machine), which no Lambda container ever does.
    """
    return {
        "LAMBDA_TASK_ROOT": str(repository_root() / "lambdas" / function),
        "_HANDLER": "handler.handler",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_LAMBDA_FUNCTION_NAME": f"memstack-{function}",
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.12",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
        "POWERTOOLS_SERVICE_NAME": "memstack",
        "POWERTOOLS_LOG_LEVEL": "INFO",
        "POWERTOOLS_METRICS_NAMESPACE": "memstack",
        **LIBRARY_ENVIRONMENT,
    }


@functools.lru_cache(maxsize=16)
def stack_environment(function: str) -> dict[str, str] | None:
    """The MEMSTACK_* the small tier's stack sets for ``function``; None without the CDK libraries."""
    root = str(repository_root())
    if root not in sys.path:
        sys.path.append(root)
    try:
        from aws_cdk import App

        from stacks.config import StackConfig
        from stacks.constructs.environment import deployment_settings, function_environment, function_reads
        from stacks.memstack_stack import cdk_json_context
    except ImportError:
        return None
    config = StackConfig.from_context(App(context={**cdk_json_context(), "tier": "small"}).node)
    settings = deployment_settings(config, dict(_RESOURCES))
    return function_environment(settings, function_reads(config, function))


def lambda_environment(function: str) -> dict[str, str]:
    """What a small-tier function's process sees: the stack's MEMSTACK_* when it can be built."""
    return {**_runtime(function), **(stack_environment(function) or _representative())}


def _representative() -> dict[str, str]:
    return {
        "MEMSTACK_STORE_BACKEND": "dynamodb",
        "MEMSTACK_STM_BACKEND": "dynamodb",
        "MEMSTACK_QUEUE_BACKEND": "sqs",
        "MEMSTACK_EMBEDDER": "bedrock-titan",
        "MEMSTACK_LLM": "bedrock",
        "MEMSTACK_EMBEDDING_DIM": "1024",
        "MEMSTACK_COARSE_DIM": "256",
        "MEMSTACK_AWS_REGION": "us-east-1",
        "MEMSTACK_MEMORIES_TABLE": "memstack-memories",
        "MEMSTACK_STM_TABLE": "memstack-stm",
        "MEMSTACK_IDEMPOTENCY_TABLE": "memstack-idempotency",
        "MEMSTACK_EXTRACTION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/000000000000/memstack-extraction",
        "MEMSTACK_CONSOLIDATION_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/000000000000/memstack-consolidation",
    }


@dataclass
class HandlerImport:
    function: str
    compiled_ms: dict[str, float]
    #: the same imports' CPU time
    compiled_cpu_ms: dict[str, float]
    #: None unless asked for (``source``)
    source_ms: dict[str, float] | None
    #: median compiled import over the median of the floor measured in turn with it
    compiled_over_floor: float


@dataclass
class ColdstartReport:
    handlers: list[HandlerImport]
    layer: dict[str, Any]
    repeats: int
    #: the floor's import (compiled), every measurement of the run (``FLOOR_MODULES``), and its CPU time
    floor_ms: dict[str, float]
    floor_cpu_ms: dict[str, float]
    #: "stack" (stacks/constructs/environment.py) or "representative" (no CDK libraries here)
    environment: str
    machine: dict[str, Any] = field(default_factory=machine)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compiled_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The shell's environment for the compiled imports: without its memstack, Powertools and AWS
    settings (each function's come from the stack), and without ``PYTHONDONTWRITEBYTECODE``: the
    warm-up import must write the bytecode the layer ships, or every module changed since the
    checkout last wrote it is compiled again on every timed import (with it set, ~100 of the
    API function's modules were, a tenth of its import time)."""
    return {
        k: v
        for k, v in environ.items()
        if not k.startswith(("MEMSTACK_", "POWERTOOLS_", "AWS_")) and k != "PYTHONDONTWRITEBYTECODE"
    }


def _import_ms(handler_dir: Path | None, env: dict[str, str]) -> tuple[float, float]:
    """One fresh interpreter's import of the handler in ``handler_dir`` (the floor's when None):
    (wall ms, CPU ms)."""
    args = ["-c", _FLOOR] if handler_dir is None else ["-c", _IMPORT, str(handler_dir)]
    out = subprocess.run(
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 1), "min": min(values), "max": max(values)}


def layer_size(root: Path) -> dict[str, Any]:
    """The built layer's unzipped and zipped size (``make layer`` builds it)."""
    site, archive = root / "build" / "layer", root / "build" / "layer.zip"
    if not site.exists() or not archive.exists():
        return {"built": False, "hint": "run `make layer` first"}
    files = [p for p in site.rglob("*") if p.is_file()]
    return {
        "built": True,
        "unzipped_mb": round(sum(p.stat().st_size for p in files) / 1e6, 1),
        "zipped_mb": round(archive.stat().st_size / 1e6, 1),
        "pyc_files": sum(1 for p in files if p.suffix == ".pyc"),
        "py_files": sum(1 for p in files if p.suffix == ".py"),
    }


def run_coldstart_bench(
    repeats: int = 5, *, only: Sequence[str] = (), source: bool = False, progress: Any = lambda _: None
) -> ColdstartReport:
    """``only``: the handlers to measure (directory names under ``lambdas/``); all when empty.
    ``source``: also without bytecode (see the module's docstring)."""
    root = repository_root()
    handler_dirs = sorted(p.parent for p in (root / "lambdas").glob("*/handler.py"))
    if not handler_dirs:
        raise FileNotFoundError(f"no Lambda handlers under {root / 'lambdas'}: run this from a checkout")
    if only:
        unknown = set(only) - {d.name for d in handler_dirs}
        if unknown:
            raise FileNotFoundError(f"no such handler: {', '.join(sorted(unknown))}")
        handler_dirs = [d for d in handler_dirs if d.name in only]
    base = compiled_environment(os.environ)
    results = []
    floors: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="memstack-nopyc-") as empty:
        _import_ms(None, base)  # the floor's bytecode too
        for handler_dir in handler_dirs:
            function = handler_dir.name
            progress(
                f"importing {function} ({repeats}x, in turn with the floor{', then from source' * source})"
            )
            env = {**base, **lambda_environment(function)}
            _import_ms(handler_dir, env)  # writes any bytecode still missing
            compiled, floor = [], []
            for _ in range(repeats):  # in turn with the floor, so load drift weighs on both alike
                compiled.append(_import_ms(handler_dir, env))
                floor.append(_import_ms(None, env))
            source_ms = None
            if source:
                source_env = {**env, "PYTHONPYCACHEPREFIX": empty, "PYTHONDONTWRITEBYTECODE": "1"}
                source_ms = _summary([_import_ms(handler_dir, source_env)[0] for _ in range(repeats)])
            floors += floor
            wall = [w for w, _ in compiled]
            ratio = round(statistics.median(wall) / statistics.median(w for w, _ in floor), 2)
            cpu = _summary([c for _, c in compiled])
            results.append(HandlerImport(function, _summary(wall), cpu, source_ms, ratio))
            progress(
                f"  {function}: {statistics.median(wall):.0f} ms ({cpu['median']:.0f} ms CPU), "
                f"{ratio:.2f}x its floor"
            )
    source_of_env = "stack" if stack_environment(handler_dirs[0].name) is not None else "representative"
    return ColdstartReport(
        handlers=results,
        layer=layer_size(root),
        repeats=repeats,
        floor_ms=_summary([w for w, _ in floors]),
        floor_cpu_ms=_summary([c for _, c in floors]),
        environment=source_of_env,
    )
