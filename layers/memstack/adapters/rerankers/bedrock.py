"""The Bedrock reranker: the ``bedrock-agent-runtime`` Rerank API (Amazon Rerank or Cohere Rerank).

The model is chosen by its ARN (``MEMSTACK_BEDROCK_RERANK_MODEL_ARN``), e.g.
``arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0``. One call
scores up to 1000 passages against one query; the answer lists
(index, relevanceScore) pairs, which we put back in the passages' order.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from memstack.errors import DependencyFailed, SettingsError, Throttled

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

MAX_SOURCES = 1000
#: the Rerank API refuses empty texts; a blank passage is sent as this and scored as such
_BLANK = " "


def bedrock_agent_runtime_client(region: str | None = None) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-agent-runtime",
        region_name=region,
        config=Config(retries={"mode": "adaptive", "max_attempts": 8}, read_timeout=30, connect_timeout=5),
    )


class BedrockReranker:
    def __init__(
        self, model_arn: str | None, *, client: Any | None = None, region: str | None = None
    ) -> None:
        if not model_arn:
            raise SettingsError("MEMSTACK_BEDROCK_RERANK_MODEL_ARN: the bedrock reranker needs a model ARN")
        self.model_arn = model_arn
        self.name = f"bedrock:{model_arn.rsplit('/', 1)[-1]}"
        self.region = region
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = bedrock_agent_runtime_client(self.region)
        return self._client

    def request(self, query: str, passages: list[str]) -> dict[str, Any]:
        """The Rerank request for one query and its passages (all results, no paging)."""
        return {
            "queries": [{"type": "TEXT", "textQuery": {"text": query or _BLANK}}],
            "sources": [
                {
                    "type": "INLINE",
                    "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": p or _BLANK}},
                }
                for p in passages
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "numberOfResults": len(passages),
                    "modelConfiguration": {"modelArn": self.model_arn},
                },
            },
        }

    def rerank(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        scores: list[float] = []
        for start in range(0, len(passages), MAX_SOURCES):
            scores += self._rerank_chunk(query, passages[start : start + MAX_SOURCES])
        return scores

    def _rerank_chunk(self, query: str, passages: list[str]) -> list[float]:
        try:
            response = self.client.rerank(**self.request(query, passages))
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("ThrottlingException", "ServiceQuotaExceededException"):
                raise Throttled("Bedrock Rerank throttled the request after retries") from exc
            raise DependencyFailed(f"Bedrock Rerank failed: {code or exc}") from exc
        except BotoCoreError as exc:
            raise DependencyFailed(f"Bedrock Rerank failed: {exc}") from exc
        found: dict[int, float] = {}
        results = response.get("results")
        if not isinstance(results, list):
            raise DependencyFailed("Bedrock Rerank returned no results list")
        for result in results:
            index = result.get("index") if isinstance(result, dict) else None
            score = result.get("relevanceScore") if isinstance(result, dict) else None
            if (
                not isinstance(index, int)
                or not 0 <= index < len(passages)
                or not isinstance(score, (int, float))
                or not math.isfinite(score)
            ):
                raise DependencyFailed(f"Bedrock Rerank returned a malformed result: {result!r}")
            found[index] = float(score)
        # A passage the model did not return (it should return all) ranks below every returned one.
        floor = min(found.values(), default=0.0) - 1.0
        return [found.get(i, floor) for i in range(len(passages))]


def build(settings: Settings, clients: Mapping[str, Any]) -> BedrockReranker:
    """``MEMSTACK_RERANKER=bedrock``; ``clients["bedrock_agent_runtime"]`` when given."""
    return BedrockReranker(
        settings.bedrock.rerank_model_arn,
        client=clients.get("bedrock_agent_runtime"),
        region=settings.aws.aws_region,
    )
