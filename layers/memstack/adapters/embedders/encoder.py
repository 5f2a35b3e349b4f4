"""The numpy pieces shared by the offline sentence encoders (MiniLM, MPNet): no torch.

Both models are post-LayerNorm transformer encoders with exact-erf GELU,
mean pooling and L2 normalisation; they differ in their embeddings and
attention bias (``minilm`` and ``mpnet`` hold those). ``SentenceEncoder`` is
the embedder both present: lazy, shared model loading, longest-first passes
of bounded size, each pass's texts packed without padding (``Packed``), one
BLAS thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memstack.domain.vectors import normalise

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


def gelu_rows_(x: np.ndarray) -> np.ndarray:
    """``gelu_`` over a (rows, width) array, a block of rows at a time, in place.

    The exact form takes ~20 elementwise passes; over a whole feed-forward activation
    (1,000 tokens x 1,536, 6 MB) every pass goes to memory, over a block of
    ``_GELU_ROWS`` rows (~0.8 MB) they stay in cache: half the time, the same values.
    """
    for start in range(0, x.shape[0], _GELU_ROWS):
        gelu_(x[start : start + _GELU_ROWS])
    return x


_GELU_ROWS = 128


def layer_norm_(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis of a (rows, width) array, in place on ``x`` (which is returned).

    In place and with the variance as one dot product per row: six passes over ``x``
    where the textbook form takes nine and four temporaries (~30% less time).
    """
    x -= x.mean(axis=-1, keepdims=True)
    scale = np.einsum("ij,ij->i", x, x)[:, None]
    scale *= np.float32(1.0 / x.shape[-1])
    scale += np.float32(eps)
    np.sqrt(scale, out=scale)
    x /= scale
    x *= weight
    x += bias
    return x


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


def input_major(torch_weight: np.ndarray) -> np.ndarray:
    """A torch Linear weight, stored (out, in), as the contiguous (in, out) matrix ``x @ W`` needs.

    A transposed view would skip the copy (~40 MB for MiniLM, a few ms once per process),
    but OpenBLAS multiplies the few-token passes ingest mostly makes (one or two short
    texts) 1.3-1.5x faster by a contiguous right-hand matrix (25 rows: 52 vs 34 GFLOPS).
    """
    return np.ascontiguousarray(torch_weight.T, dtype=np.float32)


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


@dataclass
class ModelDir:
    """What every sentence-transformers model directory gives: configs, tokenizer, weights."""

    config: dict[str, Any]
    max_len: int
    tokenizer: Any
    weights: dict[str, np.ndarray]

    @property
    def hidden(self) -> int:
        return int(self.config["hidden_size"])

    @property
    def heads(self) -> int:
        return int(self.config["num_attention_heads"])

    @property
    def eps(self) -> float:
        return float(self.config["layer_norm_eps"])


def read_model_dir(model_dir: Path, supported: Callable[[dict[str, Any]], bool]) -> ModelDir:
    """Read a model directory, refusing an architecture the forward pass does not implement.

    Refusing is better than silently computing different vectors.
    """
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    config = json.loads((model_dir / "config.json").read_text())
    st_config = json.loads((model_dir / "sentence_bert_config.json").read_text())
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    if config.get("hidden_act") != "gelu" or not supported(config):
        raise RuntimeError(f"unsupported model config in {model_dir}: {config}")
    if not pooling.get("pooling_mode_mean_tokens"):
        raise RuntimeError(f"only mean pooling is implemented, got {pooling}")
    max_len = int(st_config["max_seq_length"])
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # tokenizer.json may ship fixed padding/truncation; sentence-transformers truncates at
    # max_seq_length and pads per batch, which SentenceEncoder.embed does itself.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_len)
    return ModelDir(config, max_len, tokenizer, load_file(str(model_dir / "model.safetensors")))


class Packed:
    """A pass's texts packed end to end, without padding, and how to lay them out padded.

    The per-token work (every projection, the GELU, the LayerNorms: nearly all of a layer's
    arithmetic) runs over ``tokens`` rows, the texts' real tokens one after another, so
    no time goes to padding however different the texts' lengths. Only attention, which
    mixes the tokens of one text, needs the (texts, longest) grid: ``grid`` scatters
    rows into it (padding rows zero), ``rows`` gathers them back, and ``key_bias`` keeps
    padding keys out of every softmax.
    """

    def __init__(self, token_ids: Sequence[Sequence[int]]) -> None:
        lengths = np.fromiter((len(t) for t in token_ids), dtype=np.int64, count=len(token_ids))
        if not len(lengths) or lengths.min() < 1:
            raise ValueError("every text needs at least one token")
        self.batch, self.length = len(lengths), int(lengths.max())
        self.lengths = lengths
        self.tokens = int(lengths.sum())
        self.starts = np.cumsum(lengths) - lengths
        self.ids = np.fromiter(chain.from_iterable(token_ids), dtype=np.int64, count=self.tokens)
        #: each token's position in its text: 0, 1, ... for every text
        self.positions = np.arange(self.tokens) - np.repeat(self.starts, lengths)
        mask = np.arange(self.length)[None, :] < lengths[:, None]  # (B, L)
        # Flat grid cell of every real token; None when every text has the longest length.
        self._cells = np.flatnonzero(mask) if self.tokens < mask.size else None
        #: (B, 1, 1, L): a large negative score for padding keys, so softmax gives them ~0 weight
        self.key_bias = ((~mask).astype(np.float32) * np.float32(-1e4))[:, None, None, :]

    def grid(self, rows: np.ndarray) -> np.ndarray:
        """(tokens, C) rows as a (B, L, C) padded grid."""
        if self._cells is None:
            return rows.reshape(self.batch, self.length, -1)
        out = np.zeros((self.batch * self.length, rows.shape[1]), dtype=rows.dtype)
        out[self._cells] = rows
        return out.reshape(self.batch, self.length, -1)

    def rows(self, grid: np.ndarray) -> np.ndarray:
        """A (B, L, C) grid's real tokens as (tokens, C) rows."""
        flat = grid.reshape(self.batch * self.length, -1)
        return flat if self._cells is None else flat[self._cells]

    def mean(self, x: np.ndarray) -> np.ndarray:
        """Mean pooling: each text's mean token row, (B, C)."""
        return np.add.reduceat(x, self.starts, axis=0) / self.lengths[:, None].astype(np.float32)


class EncoderModel(Protocol):
    def tokenize(self, texts: list[str]) -> list[list[int]]: ...

    def forward(self, packed: Packed) -> np.ndarray: ...


def self_attention(x: np.ndarray, layer: _Layer, packed: Packed, heads: int, bias: np.ndarray) -> np.ndarray:
    """Multi-head attention of one layer over ``x`` (tokens, H); ``bias`` is added to every score."""
    hidden = x.shape[-1]
    head_dim = hidden // heads
    qkv = x @ layer.qkv_w
    qkv += layer.qkv_b
    qkv = packed.grid(qkv).reshape(packed.batch, packed.length, 3, heads, head_dim)
    q = qkv[:, :, 0].transpose(0, 2, 1, 3)  # (B, H, L, d)
    k = qkv[:, :, 1].transpose(0, 2, 3, 1)  # (B, H, d, L)
    v = qkv[:, :, 2].transpose(0, 2, 1, 3)
    scores = q @ k
    scores *= np.float32(1.0 / np.sqrt(head_dim))
    scores += bias
    scores -= scores.max(axis=-1, keepdims=True)
    np.maximum(scores, _SOFTMAX_FLOOR, out=scores)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    ctx = packed.rows((scores @ v).transpose(0, 2, 1, 3).reshape(packed.batch, packed.length, hidden))
    out = ctx @ layer.out_w
    out += layer.out_b
    return out


def encoder_layer(
    x: np.ndarray, layer: _Layer, packed: Packed, heads: int, bias: np.ndarray, eps: float
) -> np.ndarray:
    """One post-LayerNorm block: attention + residual + LN, then GELU feed-forward + residual + LN."""
    h = self_attention(x, layer, packed, heads, bias)
    h += x
    x = layer_norm_(h, layer.ln1_w, layer.ln1_b, eps)
    inter = x @ layer.inter_w
    inter += layer.inter_b
    h = gelu_rows_(inter) @ layer.ffn_out_w
    h += layer.ffn_out_b
    h += x
    return layer_norm_(h, layer.ln2_w, layer.ln2_b, eps)


_TOKENS_PER_PASS = 1024


class SentenceEncoder:
    """An ``Embedder`` over one encoder model, loaded lazily and once per process (under a lock)."""

    dim: int
    name: str
    #: loaded models by directory, shared by every instance of the subclass
    _models: dict[Path, Any]
    _load_lock = threading.Lock()

    def __init__(self, batch_size: int = 64, model_dir: Path | str | None = None) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.batch_size = batch_size
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._model: EncoderModel | None = None

    def default_model_dir(self) -> Path:
        raise NotImplementedError

    def load(self, model_dir: Path) -> EncoderModel:
        raise NotImplementedError

    def _get_model(self) -> EncoderModel:
        if self._model is None:
            model_dir = self._model_dir or self.default_model_dir()
            with self._load_lock:
                model = self._models.get(model_dir)
                if model is None:
                    model = self._models[model_dir] = self.load(model_dir)
            self._model = model
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._get_model()
        token_ids = model.tokenize(list(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        # Longest first, so the texts of a pass have similar lengths and its attention grid
        # (the one padded step) wastes little; a pass holds at most batch_size texts and about
        # _TOKENS_PER_PASS tokens, which keeps the intermediate arrays a few MB (near cache
        # size) however long the texts are.
        order = sorted(range(len(texts)), key=lambda i: -len(token_ids[i]))
        with _one_blas_thread:
            self._run_passes(model, token_ids, order, out)
        return normalise(out)

    def _run_passes(
        self, model: EncoderModel, token_ids: list[list[int]], order: list[int], out: np.ndarray
    ) -> None:
        start = 0
        while start < len(order):
            length = len(token_ids[order[start]])
            rows = order[start : start + max(1, min(self.batch_size, _TOKENS_PER_PASS // length))]
            start += len(rows)
            out[rows] = model.forward(Packed([token_ids[i] for i in rows]))
