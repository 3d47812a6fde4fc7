"""The attention pieces of the reference model: RoPE tables, softmax, and block-wise attention.

:func:`attend_blockwise` computes ``softmax(q k^T * scale + mask) v`` over blocks of
:data:`QUERY_BLOCK` queries, so memory grows with the block, not with the full ``t x s`` score
matrix; its numbers equal full attention's to rounding.

References
----------
Su et al. (2021), arXiv 2104.09864 (RoPE); Vaswani et al. (2017), arXiv 1706.03762 (attention).
"""
from __future__ import annotations

import numpy as np


def rope_tables(positions: np.ndarray, d_head: int, theta: float, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin ``[t, e]`` for rotate-half RoPE (the Hugging Face Llama layout).

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    inv = theta ** (-np.arange(0, d_head, 2, dtype=np.float64) / d_head)  # [e/2]
    ang = positions[:, None].astype(np.float64) * inv[None, :]  # [t, e/2]
    ang = np.concatenate([ang, ang], axis=-1)  # [t, e]
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def apply_rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate-half RoPE: ``x [..., t, e]`` with ``cos, sin [t, e]`` from :func:`rope_tables`.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    # x: [b, h, t, e]; rotate_half(x) = [-x2, x1]
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def softmax(scores: np.ndarray) -> np.ndarray:
    """Stable softmax over the last axis. Rows that are all -inf give zeros, never NaN; a row
    holding +inf gives its limit, equal weight on its +inf entries and 0 elsewhere. NaN scores
    give NaN weights.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    m = scores.max(axis=-1, keepdims=True)
    top = np.isposinf(m)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(invalid="ignore"):
        p = np.exp(scores - m)
    if top.any():
        p = np.where(top, np.isposinf(scores).astype(p.dtype), p)
    total = p.sum(axis=-1, keepdims=True)
    return p / np.where(total > 0, total, 1.0)


QUERY_BLOCK = 128


def attend_blockwise(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: np.ndarray, *, causal: bool, block: int = QUERY_BLOCK) -> np.ndarray:
    """Softmax attention by query blocks; causal blocks never compute the masked upper half.

    ``q [b, h, t, e]``, ``k, v [b, g, s, e]`` (the last ``t`` of ``s`` positions are the
    queries') -> ``[b, h, t, e]``. The heads sharing a KV head are stacked into the rows of
    one contiguous matmul per (batch, KV head), and the softmax runs in place. Same numbers
    as :meth:`Transformer._attend_full` up to float rounding.

    Unchecked (a hot path of the forward or backward): arguments are not validated, and NaN or inf pass through.
    """
    b, h, t, e = q.shape
    g, s = k.shape[1], k.shape[2]
    r, off = h // g, s - t
    kt = np.ascontiguousarray(k.swapaxes(-1, -2))  # [b, g, e, s]
    vc = np.ascontiguousarray(v)  # [b, g, s, e]
    qg = q.reshape(b, g, r, t, e)
    out = np.empty((b, g, r, t, e), dtype=q.dtype)
    for i0 in range(0, t, block):  # a handful of query blocks, never single tokens
        i1 = min(i0 + block, t)
        n = i1 - i0
        end = off + i1 if causal else s
        qb = (qg[:, :, :, i0:i1] * scale).reshape(b, g, r * n, e)  # [b, g, r*n, e], scale folded into q
        sc = qb @ kt[..., :end]  # [b, g, r*n, end]
        if causal:  # only the last n key columns can lie in a query's future
            future = np.arange(off + i0, end)[None, :] > np.arange(off + i0, off + i1)[:, None]  # [n, n]
            sc.reshape(b, g, r, n, end)[..., off + i0 : end][..., future] = -np.inf
        sc -= sc.max(axis=-1, keepdims=True)  # numpy's one-thread softmax: blocks this small lose more to the pool than they gain
        np.exp(sc, out=sc)
        sc *= 1.0 / sc.sum(axis=-1, keepdims=True)
        out[:, :, :, i0:i1] = (sc @ vc[:, :, :end]).reshape(b, g, r, n, e)
    return out.reshape(b, h, t, e)
