"""Fault injection for port adapters and AWS clients: a proxy that fails chosen calls.

``Faulty(real, send=[Fail(DependencyFailed("down"))])`` behaves as ``real``
except that its first ``send`` call raises. A ``Fail`` can strike before the
call (nothing happened) or ``after`` it (it happened, then the caller saw an
error: a timeout after the write landed), on a chosen call number. ``Crash``
is a ``BaseException``: no ``except Exception`` in the code under test
catches it, so it stands for the process dying at that point (a job's lease
is left as a dead worker leaves it).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError


class Crash(BaseException):
    """The process dies here."""


@dataclass
class Fail:
    error: BaseException
    after: bool = False  # True: the call's effect happens, then the caller gets the error
    on_call: int = 1  # which call of the method fails (1 = the first)
    times: int = 1  # how many consecutive calls fail from there


class Faulty:
    """``real`` with the calls named in ``plan`` failing as planned; ``calls`` counts every call."""

    def __init__(self, real: Any, **plan: Fail | list[Fail]) -> None:
        self._real = real
        self._plan = {name: f if isinstance(f, list) else [f] for name, f in plan.items()}
        self.calls: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()

    @property
    def real(self) -> Any:
        return self._real

    def _due(self, name: str) -> Fail | None:
        n = self.calls[name]
        for fail in self._plan.get(name, []):
            if fail.on_call <= n < fail.on_call + fail.times:
                return fail
        return None

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._real, name)
        if not callable(target) or name.startswith("__"):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            fail = self._due(name)
            if fail is not None and not fail.after:
                self.injected[name] += 1
                raise fail.error
            result = target(*args, **kwargs)
            if fail is not None:
                self.injected[name] += 1
                raise fail.error
            return result

        return call


def client_error(
    code: str, operation: str = "Call", status: int = 500, message: str = "injected"
) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        operation,
    )


def throttled(operation: str = "Call") -> ClientError:
    return client_error("ThrottlingException", operation, 400, "Rate exceeded")


def server_error(operation: str = "Call") -> ClientError:
    return client_error("InternalServerError", operation, 500)


def timeout() -> ReadTimeoutError:
    return ReadTimeoutError(endpoint_url="https://aws.test/")
