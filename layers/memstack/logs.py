"""Logging is configured here, at the edges; the domain and adapters only log.

Every module logs through stdlib ``logging.getLogger(__name__)``, whose records
reach the ``memstack`` logger. ``configure_logging`` gives that logger its
handler once per process: Powertools' structured JSON (CloudWatch in Lambda),
written to whatever ``sys.stderr`` is at the time, so it never mixes into a
CLI's ``--json`` stdout and test capture sees it. ``memstack.factory`` calls
it when it is imported, so every edge that builds a service (API, CLI,
workers, MCP, a Lambda handler) configures it first, as the retrieval module
did before the domain stopped configuring logs; a later Powertools ``Logger``
of the same service (a Lambda handler's) leaves it as it is.
"""

from __future__ import annotations

import logging
import sys

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.filters import SuppressFilter

SERVICE = "memstack"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """Writes to whatever ``sys.stderr`` is at the time (test capture, CLI redirection)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def configure_logging() -> None:
    """The ``memstack`` logger as structured JSON on stderr (idempotent: Powertools configures it once)."""
    Logger(service=SERVICE, logger_handler=_StderrHandler())


def keep_out_of_root_handlers() -> None:
    """Records of memstack's loggers are written once, by their own handlers, never again by the root's.

    They propagate (pytest's ``caplog`` reads them at the root), so a handler a
    library puts on the root logger prints each of them a second time: the MCP
    SDK's ``logging.basicConfig`` with a rich console handler did, so every
    request of ``memstack serve`` was logged as a JSON line and a formatted
    one. Powertools filters the root handlers present when a logger is made;
    this does it for those added later. pytest's own handlers are left alone.
    """
    for handler in logging.root.handlers:
        if type(handler).__module__ == "_pytest.logging":
            continue
        if not any(isinstance(f, SuppressFilter) and f.logger == SERVICE for f in handler.filters):
            handler.addFilter(SuppressFilter(SERVICE))  # every logger whose name holds "memstack"
