"""Which ``pip install 'memstack[EXTRA]'`` brings each optional module: one-line errors, not tracebacks.

The keys are import names, the values the extras of pyproject.toml that list the
distribution (tests/packaging/test_extras.py checks each against pyproject).
"""

from __future__ import annotations

MODULE_EXTRAS = {
    "httpx": "client",
    "typer": "server",
    "rich": "server",
    "waitress": "server",
    "numpy": "server",
    "threadpoolctl": "server",
    "pydantic_settings": "server",
    "dateparser": "server",
    "snowballstemmer": "server",
    "lemminflect": "server",
    "aws_lambda_powertools": "server",
    "tokenizers": "local",
    "safetensors": "local",
    "boto3": "server",
    "botocore": "aws",
    "aws_xray_sdk": "aws",
    "opensearchpy": "opensearch",
    "requests": "opensearch",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "mcp": "integrations",
    "a2wsgi": "integrations",
    "langgraph": "integrations",
    "langchain_core": "integrations",
    "strands": "integrations",
    "matplotlib": "plot",
}


def missing_module_hint(exc: ModuleNotFoundError) -> str | None:
    """One line naming the extra that brings the missing module; None for memstack's own modules."""
    name = (exc.name or "").split(".", 1)[0]
    if not name or name == "memstack":
        return None
    extra = MODULE_EXTRAS.get(name)
    if extra is None:
        return f"the Python module {name!r} is not installed (pip install the memstack extra that needs it)"
    return f"this needs the {extra!r} extra ({name} is not installed): pip install 'memstack[{extra}]'"
