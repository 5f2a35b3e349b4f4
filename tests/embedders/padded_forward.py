"""The encoders' forward pass as it was before packing: every text padded to the batch's longest.

A plain, textbook BERT/MPNet pass (padded (B, L) grid, a key-padding mask, one GELU over
the whole activation, mean pooling by mask weights) over the same loaded weights, kept as
the reference the packed pass (``encoder.Packed``) must reproduce within float32 rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from memstack.adapters.embedders.encoder import gelu_
from memstack.adapters.embedders.mpnet import relative_position_buckets


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


def _attention(
    x: np.ndarray, layer: Any, batch: int, length: int, heads: int, bias: np.ndarray
) -> np.ndarray:
    hidden = x.shape[-1]
    d = hidden // heads
    qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(batch, length, 3, heads, d)
    q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
    scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(d)) + bias
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, hidden)
    return ctx @ layer.out_w + layer.out_b


def _padded(model: Any, token_ids: list[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    length = max(map(len, token_ids))
    ids = np.full((len(token_ids), length), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, tokens in enumerate(token_ids):
        ids[row, : len(tokens)], mask[row, : len(tokens)] = tokens, 1
    return ids, mask


def _encode(model: Any, x: np.ndarray, mask: np.ndarray, bias: np.ndarray) -> np.ndarray:
    batch, length = mask.shape
    weight, bias_ln = model.emb_ln
    x = layer_norm(x, weight, bias_ln, model.eps).reshape(batch * length, model.hidden)
    for layer in model.layers:
        h = _attention(x, layer, batch, length, model.heads, bias) + x
        h = layer_norm(h, layer.ln1_w, layer.ln1_b, model.eps)
        ffn = gelu_(h @ layer.inter_w + layer.inter_b) @ layer.ffn_out_w + layer.ffn_out_b
        x = layer_norm(ffn + h, layer.ln2_w, layer.ln2_b, model.eps)
    weights = mask.astype(np.float32)[:, :, None]
    pooled = (x.reshape(batch, length, -1) * weights).sum(axis=1) / weights.sum(axis=1)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def _key_bias(mask: np.ndarray) -> np.ndarray:
    return ((1.0 - mask.astype(np.float32)) * np.float32(-1e4))[:, None, None, :]


def minilm_padded(model: Any, texts: list[str]) -> np.ndarray:
    ids, mask = _padded(model, model.tokenize(texts), pad_id=0)
    x = model.word_emb[ids] + model.pos_emb[: ids.shape[1]] + model.type0_emb
    return _encode(model, x, mask, _key_bias(mask))


def mpnet_padded(model: Any, texts: list[str]) -> np.ndarray:
    ids, mask = _padded(model, model.tokenize(texts), pad_id=model.pad_id)
    positions = np.cumsum(mask, axis=1) * mask + model.pad_id
    x = model.word_emb[ids] + model.pos_emb[positions]
    rel = model.rel_bias[relative_position_buckets(ids.shape[1], model.buckets)].transpose(2, 0, 1)
    return _encode(model, x, mask, rel[None] + _key_bias(mask))
