"""JSON answers with an explicit status (routes answer 200, 202, ...), serialised once."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types


def json_response(status: int, body: Any) -> Response:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=json.dumps(body))
