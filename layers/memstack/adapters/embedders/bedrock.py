"""Bedrock embedders: Amazon Titan Text Embeddings V2 (default) and Cohere Embed.

Both return full-dimension, L2-normalised float32 rows; the coarse Matryoshka
vector is the domain's job (``domain.vectors.coarse_prefix``). Whether that
prefix is meaningful depends on the model (``matryoshka`` below; see
docs/backends.md): for a model not trained for it, set
``MEMSTACK_COARSE_DIM`` equal to ``MEMSTACK_EMBEDDING_DIM`` so the coarse
pass uses the whole vector.

- Titan V2 (``amazon.titan-embed-text-v2:0``) embeds one text per
  ``InvokeModel`` call (the synchronous API has no batch form), so a batch runs
  as a few concurrent calls. ``dimensions`` is 256, 512 or 1024; ``normalize``
  is on.
- Cohere Embed (``cohere.embed-english-v3``, ``cohere.embed-multilingual-v3``,
  ``cohere.embed-v4:0``) takes up to 96 texts per call.

The bedrock-runtime client is passed in (tests use ``botocore.stub.Stubber``)
or created on first use with adaptive retries, and kept for the container's
life. Throttling that outlasts the retries and malformed answers become
``DependencyFailed`` with a message naming the model.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
from botocore.exceptions import BotoCoreError, ClientError

from memstack.domain.vectors import normalise
from memstack.errors import DependencyFailed, SettingsError, Throttled

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

logger = logging.getLogger(__name__)

TITAN_V2_DIMENSIONS = (256, 512, 1024)
COHERE_V4_DIMENSIONS = (256, 512, 1024, 1536)
COHERE_V3_DIMENSIONS = {"cohere.embed-english-v3": 1024, "cohere.embed-multilingual-v3": 1024}
COHERE_BATCH = 96
#: Cohere's per-text limit on Bedrock (characters); longer texts are cut at the end.
COHERE_MAX_CHARS = 2048
#: Titan V2 accepts 8k tokens (~50k characters); cut well below so a huge text never fails.
TITAN_MAX_CHARS = 40_000


def prefix_is_meaningful(model_id: str) -> bool:
    """Whether a Matryoshka prefix of this model's vectors is a meaningful coarse vector.

    Cohere Embed v4 is trained for it; Titan V2's 256/512/1024 are separate output
    sizes, and Cohere v3 has one size, so a prefix of either is a weaker coarse pass.
    The stack checks its tier defaults against this (stacks/config.py).
    """
    return "embed-v4" in model_id


def bedrock_runtime_client(region: str | None = None) -> Any:
    """A bedrock-runtime client with adaptive (client-side rate limited) retries."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name=region,
        config=Config(retries={"mode": "adaptive", "max_attempts": 8}, read_timeout=30, connect_timeout=5),
    )


def _error(model: str, exc: Exception) -> DependencyFailed:
    if isinstance(exc, ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code in ("ThrottlingException", "TooManyRequestsException", "ServiceQuotaExceededException"):
            return Throttled(f"Bedrock throttled {model} after retries; try again shortly")
        return DependencyFailed(f"Bedrock {model} failed: {code or exc}")
    return DependencyFailed(f"Bedrock {model} failed: {exc}")


class _BedrockEmbedder:
    """What both providers share: the client, the call, checking what comes back."""

    name: str
    dim: int
    matryoshka: bool

    def __init__(self, model_id: str, client: Any | None, region: str | None) -> None:
        self.model_id = model_id
        self.region = region
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = bedrock_runtime_client(self.region)
        return self._client

    def _invoke(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self.client.invoke_model(
                modelId=self.model_id,
                body=json.dumps(body),
                contentType="application/json",
                accept="application/json",
            )
            payload = json.loads(response["body"].read())
        except (ClientError, BotoCoreError) as exc:
            raise _error(self.model_id, exc) from exc
        except (ValueError, KeyError) as exc:
            raise DependencyFailed(f"Bedrock {self.model_id} returned a body that is not JSON") from exc
        if not isinstance(payload, dict):
            raise DependencyFailed(f"Bedrock {self.model_id} returned an unexpected body")
        return payload

    def _matrix(self, rows: Any, expected: int) -> np.ndarray:
        """Validate the vectors a model returned: count, dimension, finite numbers."""
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise DependencyFailed(f"Bedrock {self.model_id} returned non-numeric embeddings") from exc
        if matrix.ndim != 2 or matrix.shape != (expected, self.dim) or not np.isfinite(matrix).all():
            raise DependencyFailed(
                f"Bedrock {self.model_id} returned embeddings of shape {matrix.shape}, "
                f"expected ({expected}, {self.dim})"
            )
        return normalise(matrix)

    def _warn_if_prefix_unsafe(self, coarse_dim: int | None) -> None:
        if coarse_dim is not None and coarse_dim < self.dim and not self.matryoshka:
            logger.warning(
                "embedding model %s is not Matryoshka-trained: a %d-d prefix of its %d-d vectors is a "
                "weaker coarse pass; set MEMSTACK_COARSE_DIM=%d to use the whole vector",
                self.model_id,
                coarse_dim,
                self.dim,
                self.dim,
            )


class TitanEmbedder(_BedrockEmbedder):
    """Amazon Titan Text Embeddings V2."""

    # AWS documents 256/512/1024 as separate output sizes, not as nested prefixes.
    matryoshka = prefix_is_meaningful("amazon.titan-embed-text-v2:0")

    def __init__(
        self,
        dim: int = 1024,
        *,
        model_id: str = "amazon.titan-embed-text-v2:0",
        client: Any | None = None,
        region: str | None = None,
        coarse_dim: int | None = None,
        concurrency: int = 8,
    ) -> None:
        if dim not in TITAN_V2_DIMENSIONS:
            raise SettingsError(
                f"MEMSTACK_EMBEDDING_DIM: Titan Text Embeddings V2 produces {TITAN_V2_DIMENSIONS} "
                f"dimensions, not {dim}"
            )
        super().__init__(model_id, client, region)
        self.dim = dim
        self.name = f"{model_id}/{dim}"
        self.concurrency = concurrency
        self._warn_if_prefix_unsafe(coarse_dim)

    def _one(self, text: str) -> list[float]:
        payload = self._invoke(
            {"inputText": text[:TITAN_MAX_CHARS], "dimensions": self.dim, "normalize": True}
        )
        vector = payload.get("embedding")
        if vector is None:
            raise DependencyFailed(f"Bedrock {self.model_id} returned no 'embedding'")
        return list(vector)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Titan rejects empty input; a blank text gets a zero vector (it matches nothing).
        rows: list[list[float]] = [[0.0] * self.dim for _ in texts]
        todo = [i for i, t in enumerate(texts) if t.strip()]
        if len(todo) == 1 or self.concurrency <= 1:
            for i in todo:
                rows[i] = self._one(texts[i])
        elif todo:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(todo))) as pool:
                for i, vector in zip(todo, pool.map(self._one, [texts[i] for i in todo]), strict=True):
                    rows[i] = vector
        return self._matrix(rows, len(texts))


class CohereEmbedder(_BedrockEmbedder):
    """Cohere Embed on Bedrock: v3 (fixed 1024) or v4 (Matryoshka, ``output_dimension``)."""

    def __init__(
        self,
        dim: int = 1024,
        *,
        model_id: str = "cohere.embed-english-v3",
        client: Any | None = None,
        region: str | None = None,
        coarse_dim: int | None = None,
        input_type: str = "search_document",
    ) -> None:
        super().__init__(model_id, client, region)
        self.is_v4 = "embed-v4" in model_id
        if self.is_v4:
            if dim not in COHERE_V4_DIMENSIONS:
                raise SettingsError(
                    f"MEMSTACK_EMBEDDING_DIM: {model_id} produces {COHERE_V4_DIMENSIONS}, not {dim}"
                )
        else:
            native = next((d for m, d in COHERE_V3_DIMENSIONS.items() if model_id.startswith(m)), None)
            if native is not None and dim != native:
                raise SettingsError(
                    f"MEMSTACK_EMBEDDING_DIM: {model_id} produces {native} dimensions, not {dim}"
                )
        self.dim = dim
        self.name = f"{model_id}/{dim}"
        # v4 is trained with Matryoshka representation learning; v3 is not.
        self.matryoshka = prefix_is_meaningful(model_id)
        # Memories are matched against memories (extraction) and against queries (search):
        # one input type keeps both sides in the same space.
        self.input_type = input_type
        self._warn_if_prefix_unsafe(coarse_dim)

    def _batch(self, texts: list[str]) -> list[Any]:
        body: dict[str, Any] = {
            "texts": [t[:COHERE_MAX_CHARS] for t in texts],
            "input_type": self.input_type,
            "truncate": "END",
            "embedding_types": ["float"],
        }
        if self.is_v4:
            body["output_dimension"] = self.dim
        payload = self._invoke(body)
        embeddings = payload.get("embeddings")
        # With embedding_types the answer is {"float": [...]}; older answers are a bare list.
        if isinstance(embeddings, dict):
            embeddings = embeddings.get("float")
        if not isinstance(embeddings, list) or len(embeddings) != len(texts):
            count = len(embeddings) if isinstance(embeddings, list) else "no"
            raise DependencyFailed(
                f"Bedrock {self.model_id} returned {count} embeddings for {len(texts)} texts"
            )
        return embeddings

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[Any] = [[0.0] * self.dim for _ in texts]
        todo = [i for i, t in enumerate(texts) if t.strip()]
        for start in range(0, len(todo), COHERE_BATCH):
            chunk = todo[start : start + COHERE_BATCH]
            for i, vector in zip(chunk, self._batch([texts[i] for i in chunk]), strict=True):
                rows[i] = vector
        return self._matrix(rows, len(texts))


def build_titan(settings: Settings, clients: Mapping[str, Any]) -> TitanEmbedder:
    """``MEMSTACK_EMBEDDER=bedrock-titan``; ``clients["bedrock_runtime"]`` when given."""
    return TitanEmbedder(
        settings.embedding.embedding_dim,
        model_id=settings.bedrock.embedding_model,
        client=clients.get("bedrock_runtime"),
        region=settings.aws.aws_region,
        coarse_dim=settings.embedding.coarse_dim,
    )


def build_cohere(settings: Settings, clients: Mapping[str, Any]) -> CohereEmbedder:
    """``MEMSTACK_EMBEDDER=bedrock-cohere`` (``factory.EMBEDDERS``)."""
    model = settings.bedrock.embedding_model
    if model.startswith("amazon."):
        model = "cohere.embed-english-v3"  # the Titan default does not name a Cohere model
    return CohereEmbedder(
        settings.embedding.embedding_dim,
        model_id=model,
        client=clients.get("bedrock_runtime"),
        region=settings.aws.aws_region,
        coarse_dim=settings.embedding.coarse_dim,
    )
