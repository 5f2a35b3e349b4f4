"""The API function's cold import loads what serving an API call needs, not the laptop's store or
the OpenAPI document's models (``memstack bench coldstart`` measures it; issue 28: <= 600 ms)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from memstack.bench.coldstart import lambda_environment, repository_root

#: modules an API call in AWS never uses: the embedded SQLite store (and its full-text index), and
#: Powertools' OpenAPI models (a tenth of a second to build; ``/docs`` and ``/openapi.json`` load them)
NOT_ON_THE_COLD_PATH = (
    "memstack.adapters.embedded.database",
    "memstack.adapters.embedded.fts",
    "aws_lambda_powertools.event_handler.openapi.models",
)


def test_the_api_handler_imports_without_the_embedded_store_or_the_openapi_models() -> None:
    handler_dir = str(repository_root() / "lambdas" / "api")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTACK_", "POWERTOOLS_", "AWS_"))}
    code = (
        f"import json, sys; sys.path.insert(0, {handler_dir!r}); import handler; "
        f"print(json.dumps([m for m in {list(NOT_ON_THE_COLD_PATH)!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **lambda_environment("api")},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
