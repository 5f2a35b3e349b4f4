"""The line ``memstack serve`` prints names only endpoints that are served."""

from __future__ import annotations

import pytest
from memstack.cli import serve
from memstack.settings import Settings


def banner(capsys: pytest.CaptureFixture[str], *, mcp_served: bool) -> str:
    serve.print_banner("http://127.0.0.1:8000", Settings(), 1, mcp_served=mcp_served)
    return " ".join(capsys.readouterr().out.split())


def test_the_banner_names_the_mcp_endpoint_when_it_is_served(capsys: pytest.CaptureFixture[str]) -> None:
    assert "MCP: http://127.0.0.1:8000/mcp" in banner(capsys, mcp_served=True)


def test_without_the_integrations_extra_the_banner_says_how_to_get_mcp(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = banner(capsys, mcp_served=False)
    assert "/mcp" not in line
    assert "MCP: off (pip install 'memstack[integrations]')" in line


def test_mcp_installed_is_true_in_the_dev_environment() -> None:
    # make install brings the integrations extra: the check finds the SDK and a2wsgi.
    assert serve.mcp_installed()
