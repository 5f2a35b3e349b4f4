"""Each Lambda function's cold import loads what its invocations need, not what they never use
(``memstack bench coldstart`` measures it; issue 28: <= 600 ms per handler)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from memstack.bench.coldstart import lambda_environment, repository_root

HANDLERS = sorted(p.parent.name for p in (repository_root() / "lambdas").glob("*/handler.py"))

#: modules an API call in AWS never uses: the embedded SQLite store (and its full-text index, and
#: ``sqlite3`` itself), the offline models' installer, and Powertools' OpenAPI models (a tenth of a
#: second to build; ``/docs`` and ``/openapi.json`` load them)
NOT_ON_THE_API_COLD_PATH = (
    "memstack.adapters.embedded.database",
    "memstack.adapters.embedded.fts",
    "sqlite3",
    "memstack.adapters.embedders.install",
    "aws_lambda_powertools.event_handler.openapi.models",
)
#: what only a search needs: the retrieval pipeline (and the date/time patterns its query analysis
#: compiles); the API builds it on the first search, so a container that only adds never loads it
THE_SEARCH_PIPELINE = (
    "memstack.domain.retrieval.pipeline",
    "memstack.domain.query_analysis",
    "memstack.domain.time.windows",
)
#: what only consolidation needs (the job, the profile builder, the scheduler's fan-out) and the relative-date
#: patterns only a running extraction job needs: ``build_service`` builds the consolidator on the first
#: consolidation, and the extraction handler (which the API builds only to queue "extract" jobs: SQS
#: carries them to the worker) imports the patterns with its first job
CONSOLIDATION_AND_EXTRACTION_RUNS = (
    "memstack.domain.consolidation.job",
    "memstack.domain.consolidation.profiles",
    "memstack.domain.consolidation.scheduler",
    "memstack.domain.consolidation.similarity",
    "memstack.domain.time.relative",
)
#: never needed by any function: snowballstemmer's package (its ``__init__`` imports all 35
#: languages' stemmers; ``domain.text`` loads the English one alone) and Powertools' parser models
#: (the batch utility imports them for a ``model=`` argument the workers never pass)
NOT_ON_ANY_COLD_PATH = ("snowballstemmer", "aws_lambda_powertools.utilities.parser")
#: what a function that needs its settings but never stores, searches or extracts does without:
#: numpy, the records' models and the pipelines (``memstack.settings`` imports only the sections)
THE_DOMAIN = (
    "numpy",
    "memstack.models",
    "memstack.domain.retrieval.pipeline",
    "memstack.domain.ingest",
    "memstack.domain.extraction.handler",
    "memstack.domain.consolidation.job",
)


def loaded_by(function: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter holds after importing ``function``'s handler, in the
    environment the small tier's stack gives that function."""
    return list(after_import(function, f"[m for m in {list(modules)!r} if m in sys.modules]"))


def after_import(function: str, expression: str) -> Any:
    """``expression`` (JSON) in a fresh interpreter that has imported ``function``'s handler, in the
    environment the small tier's stack gives that function."""
    handler_dir = str(repository_root() / "lambdas" / function)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "POWERTOOLS_", "AWS_"))}
    code = (
        f"import json, sys; sys.path.insert(0, {handler_dir!r}); import handler; "
        f"print(json.dumps({expression}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **lambda_environment(function)},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_api_handler_imports_without_the_embedded_store_or_the_openapi_models() -> None:
    assert loaded_by("api", NOT_ON_THE_API_COLD_PATH) == []


def test_the_api_handler_imports_without_the_search_pipeline() -> None:
    assert loaded_by("api", THE_SEARCH_PIPELINE) == []


def test_the_api_handler_imports_without_building_the_request_and_response_models() -> None:
    """Each is built when a request first uses it (``schemas.Schema``), so a call builds its own."""
    built = after_import(
        "api",
        "[n for n, c in vars(sys.modules['memstack.api.schemas']).items() if isinstance(c, type) "
        "and c.__module__.startswith('memstack.api.schemas.') "
        "and getattr(c, '__pydantic_complete__', False)]",
    )
    assert built == []


@pytest.mark.parametrize("function", ["api", "webhook_worker"])
def test_the_api_and_webhook_worker_import_without_running_consolidation_or_extraction(function: str) -> None:
    assert loaded_by(function, CONSOLIDATION_AND_EXTRACTION_RUNS) == []


@pytest.mark.parametrize("function", HANDLERS)
def test_no_handler_imports_every_stemmer_language_or_the_parser_models(function: str) -> None:
    assert loaded_by(function, NOT_ON_ANY_COLD_PATH) == []


@pytest.mark.parametrize("function", ["cost_report", "schema_migration"])
def test_the_cost_report_and_the_store_upgrade_import_without_the_domain(function: str) -> None:
    assert loaded_by(function, THE_DOMAIN) == []
