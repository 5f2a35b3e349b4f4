"""memstack: long-term memory for conversational AI agents.

The package is layered: ``models`` and ``domain`` hold the product's rules and
import no AWS SDK; ``ports`` defines one small interface per external part;
``adapters`` holds one module per provider; ``factory`` wires the adapters the
``Settings`` object names; ``service`` is the facade the CLI, the local server
and the Lambda handlers call.
"""

# The one place the version is written: pyproject.toml reads it (tool.setuptools.dynamic),
# `memstack --version`, the OpenAPI document and the MCP server report it.
__version__ = "0.3.0"
