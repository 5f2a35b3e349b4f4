"""Python clients of the memstack REST API: ``MemoryClient`` (blocking) and ``AsyncMemoryClient``.

Both send the same requests, return the same pydantic models
(``memstack.api.schemas``), retry the same way (``RetryPolicy``) and raise the
same ``MemoryApiError``. They need only ``httpx`` and pydantic (``pip install 'memstack[client]'``): no
numpy, no AWS SDK (``aws_region`` signing imports botocore only when used).
"""

from memstack.client.aio import AsyncMemoryClient
from memstack.client.calls import NEVER
from memstack.client.errors import MemoryApiError
from memstack.client.retry import NO_RETRIES, RetryPolicy
from memstack.client.sync import MemoryClient

__all__ = ["NEVER", "NO_RETRIES", "AsyncMemoryClient", "MemoryApiError", "MemoryClient", "RetryPolicy"]
