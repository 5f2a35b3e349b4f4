"""The API fixtures of tests/api, shared with the reliability suite."""

from tests.api.conftest import api, small_api, small_limits  # noqa: F401  (pytest fixtures)
