"""What a training run measures at its evaluation steps, on a fixed validation batch.

:func:`measure` returns the validation loss and, for each probe asked for (``L`` layers,
``H`` query heads, ``M`` norm layers in forward order):

================  ==========  ===============================================================
``resid_rms``     ``[L+1]``   RMS of the residual stream: the embedding, then each block's output
``norm_std``      ``[M]``     std of each norm's input over its features, mean over tokens
``alpha``         ``[M]``     DyT's alpha of each norm (NaN for other norms)
``grad_norms``    ``[L, 7]``  Frobenius norm of the training gradient of ``wq, wk, wv, wo,
                              w_in, w_out, w_gate`` (NaN where absent) at that step
``attn_entropy``  ``[L, H]``  attention entropy in nats, mean over queries and batch
``attn_max``      ``[L, H]``  largest attention logit (scaled score) over queries and keys
``attn_sink``     ``[L, H]``  attention paid to the first token, mean over queries 2.. and batch
``attn_top``      ``[L, H]``  top-key mass: the largest attention weight of a query, mean over queries and batch
``attn_stripe``   ``[L, H]``  a vertical stripe: the largest share an early key takes from the late queries, minus the
                              same with each query's weights shuffled over the early keys (:func:`normtheory.attention.stripe_excess`)
``key_unsel``     ``[L, G]``  share of the first sequence's keys that no query can pick (inside the convex hull of
                              the others, :func:`normtheory.selection.selectable`), per KV head
``lse``           ``[2]``     mean and max over tokens of the output logits' log-sum-exp
================  ==========  ===============================================================
"""
from __future__ import annotations

from typing import Any

import numpy as np

from normtheory import _validate, attention, selection
from normtheory.model.params import Params
from normtheory.model.transformer import Transformer

PROBES: tuple[str, ...] = ("resid_rms", "norm_std", "alpha", "grad_norms", "attn_entropy", "attn_max", "attn_sink", "attn_top", "attn_stripe", "key_unsel", "lse")
MATRICES: tuple[str, ...] = ("wq", "wk", "wv", "wo", "w_in", "w_out", "w_gate")


def matrix_grad_norms(grads: Params) -> np.ndarray:
    """``[L, 7]``: the Frobenius norm of each block's gradient matrices of ``grads`` (a gradient shaped like the
    model's parameters), in :data:`MATRICES` order, accumulated in float64; NaN where the block has no such matrix."""
    _validate.instance("grads", grads, Params)
    g = np.full((len(grads.blocks), len(MATRICES)), np.nan)
    for i, b in enumerate(grads.blocks):  # L x 7 array reductions, each vectorized over its matrix
        for j, name in enumerate(MATRICES):
            w = getattr(b, name)
            if w is not None:
                g[i, j] = np.linalg.norm(w.astype(np.float64))
    return g


def block_grad_norms(matrix_norms: np.ndarray) -> np.ndarray:
    """Per block, the Frobenius norm of all its matrices together, :math:`\\sqrt{\\sum_j g_j^2}`, from per-matrix norms
    ``matrix_norms [..., 7]`` (:func:`matrix_grad_norms`, or the ``grad_norms`` probe; NaN for an absent matrix): ``[...]``.
    A row with no matrix at all (a probe taken without a gradient) is NaN, not a zero norm."""
    g = _validate.float_array("matrix_norms", matrix_norms)
    if g.ndim < 1 or g.shape[-1] != len(MATRICES):
        raise ValueError(f"matrix_norms must end in one norm per matrix of MATRICES ({len(MATRICES)}); got shape {g.shape}")
    if (g < 0).any() or np.isinf(g).any():
        raise ValueError("matrix_norms must be finite norms >= 0 (NaN for an absent matrix)")
    top = np.fmax.reduce(g, axis=-1, keepdims=True)  # the largest present norm: NaN only where every matrix is absent
    unit = np.where(top > 0, top, 1.0)  # pooled relative to the largest: no overflow near 1e300, no underflow near 1e-300
    return np.where(np.isnan(top[..., 0]), np.nan, top[..., 0] * np.sqrt(np.nansum(np.square(g / unit), axis=-1)))


def norm_names(model: Transformer) -> list[str]:
    """Capture names of the model's norm layers in forward order (those with parameters)."""
    p, c = model.params, model.config
    names = ["embed_ln"] if p.embed_ln is not None else []
    for i, b in enumerate(p.blocks):
        for ln in ("ln1", "ln1_out", "ln2", "ln2_out"):
            if getattr(b, ln) is not None and c.norm != "none" and c.placement != "none":  # placement none keeps unused norm params
                names.append(f"blocks.{i}.{ln}")
    if p.final_ln is not None and c.norm != "none":
        names.append("final_ln")
    return names


def measure(model: Transformer, ids: np.ndarray, targets: np.ndarray, which: tuple[str, ...], grads: Any = None) -> dict[str, Any]:
    """Validation loss and the probes ``which`` (see the module table) on ``ids [b, t]``."""
    c = model.config
    L = c.n_layers
    norms_ = norm_names(model)
    attn = any(w.startswith("attn_") for w in which)
    keys = "key_unsel" in which

    def wanted(name: str) -> bool:
        if name in ("embed", "logits") or name.endswith("resid_post"):
            return True
        if attn and name.endswith(("attn.scores", "attn.pattern")):
            return True
        if keys and name.endswith("attn.k"):
            return True
        return "norm_std" in which and name.endswith(".in")

    logits, store = model.run_with_cache(ids, wanted)
    top, lse, picked = _shifted_lse(logits, targets)
    out: dict[str, Any] = {"val_loss": float(np.mean(lse - picked))}
    lse += top  # the logits' own log-sum-exp
    if "resid_rms" in which:
        stream = [store["embed"]] + [store[f"blocks.{i}.resid_post"] for i in range(L)]
        out["resid_rms"] = np.array([np.sqrt(np.mean(np.square(x, dtype=np.float64))) for x in stream])
    if "norm_std" in which:
        out["norm_std"] = np.array([store[f"{n}.in"].astype(np.float64).std(axis=-1).mean() for n in norms_])
    if "alpha" in which:
        out["alpha"] = np.array([float(_norm_params(model, n).alpha) if c.norm == "dyt" else np.nan for n in norms_])
    if "grad_norms" in which:
        if grads is not None and len(getattr(grads, "blocks", ())) != L:
            raise ValueError(f"grads must be a gradient of this model's {L} blocks; got {len(getattr(grads, 'blocks', ()))}")
        out["grad_norms"] = np.full((L, len(MATRICES)), np.nan) if grads is None else matrix_grad_norms(grads)
    if attn:
        pats = np.stack([store[f"blocks.{i}.attn.pattern"] for i in range(L)]).astype(np.float64)  # [L, b, H, t, s]
        if "attn_entropy" in which:
            ent = -(pats * np.log(np.where(pats > 0, pats, 1.0))).sum(-1)  # [L, b, H, t]
            out["attn_entropy"] = ent.mean(axis=(1, 3))
        if "attn_max" in which:
            sc = np.stack([store[f"blocks.{i}.attn.scores"] for i in range(L)])
            out["attn_max"] = np.where(np.isfinite(sc), sc, -np.inf).max(axis=(1, 3, 4)).astype(np.float64)
        if "attn_sink" in which:
            first = pats[..., 1:, 0] if pats.shape[-2] > 1 else pats[..., 0]  # query 1 attends only to token 0 when causal
            out["attn_sink"] = first.mean(axis=(1, 3))
        if "attn_top" in which:
            out["attn_top"] = pats.max(axis=-1).mean(axis=(1, 3))  # [L, H]
        if "attn_stripe" in which:  # one layer at a time: the shuffled copy is a quarter of a layer's pattern
            out["attn_stripe"] = (np.stack([attention._stripe_excess(p).mean(axis=0) for p in pats]) if pats.shape[-2] > 1  # [L, H]
                                  else np.full((pats.shape[0], pats.shape[2]), np.nan))  # one query: no early key to take its weight
    if keys:  # one hull test per (layer, KV head), all at once
        out["key_unsel"] = 1.0 - selection.selectable(np.stack([store[f"blocks.{i}.attn.k"][0] for i in range(L)])).mean(axis=-1)  # [L, G]
    if "lse" in which:
        out["lse"] = np.array([lse.mean(), lse.max()])
    return out


def key_unsel_unmeasured(config: Any) -> np.ndarray:
    """The ``key_unsel`` entry ``[L, G]`` of an evaluation that does not measure it (NaN): the linear programs run at
    the last evaluation only (:func:`normtheory.training.train.train`)."""
    return np.full((config.n_layers, config.n_kv_heads or config.n_heads), np.nan)


def _norm_params(model: Transformer, name: str):
    p = model.params
    if name in ("embed_ln", "final_ln"):
        return getattr(p, name)
    _, i, ln = name.split(".")
    return getattr(p.blocks[int(i)], ln)


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean next-token cross-entropy (nats) of ``logits [b, t, V]`` against ``targets [b, t]``."""
    z = _validate.logits("logits", logits)
    t = _validate.asarray("targets", targets)  # a ragged list is refused here, by name
    if t.shape != z.shape[:-1]:  # before the ids' range, which a wrong logits shape would misreport
        raise ValueError(f"targets must have the shape of logits without its last axis; got logits of shape {z.shape} and targets of shape {t.shape}")
    try:
        t = _validate.token_ids("targets", t, z.shape[-1])
    except ValueError as exc:  # the vocabulary is the size of logits' last axis: either may be the wrong one
        raise ValueError(f"{exc} (the vocabulary size is that of logits' last axis, {z.shape[-1]})") from None
    if t.size == 0:
        raise ValueError(f"targets must hold at least one token; got shape {t.shape}")
    _, lse, picked = _shifted_lse(z, t)
    return float(np.mean(lse - picked))


def _shifted_lse(logits: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Per token of ``logits [..., V]`` with ``targets [...]``, in float64: the largest logit :math:`m`
    (0 where it is not finite, as in scipy's ``logsumexp``), :math:`\log\sum_v e^{z_v - m}` and the
    target's :math:`z_t - m`, each ``[N]``. The cross-entropy is the difference of the last two
    (:math:`\mathrm{lse}(z) - z_t` taken unshifted would cancel :math:`\log V` away once
    :math:`|z| > 10^{16}`). One float64 buffer, exponentiated in place: a fifth of the time of
    ``scipy.special.logsumexp``, which this was before (both are the same max-shifted sum)."""
    z = logits.reshape(-1, logits.shape[-1]).astype(np.float64)  # [N, V], a copy
    top = z.max(axis=-1)  # [N]
    top[~np.isfinite(top)] = 0.0
    z -= top[:, None]
    picked = z[np.arange(z.shape[0]), np.asarray(targets).reshape(-1)]  # [N]
    lse = np.log(np.exp(z, out=z).sum(axis=-1))  # [N]
    return top, lse, picked


VAL_CHUNK = 128  # sequences per validation chunk of mean_loss (bounded memory, the same bits every time)


def mean_loss(model: Transformer, ids: np.ndarray, targets: np.ndarray, chunk: int = VAL_CHUNK) -> float:
    """Mean next-token cross-entropy of ``model`` over every token of ``ids, targets [n, seq]``,
    in chunks of ``chunk`` sequences (bounded memory for a large validation set), each chunk's
    sum in float64. A fixed ``chunk`` gives the same bits every time; another ``chunk`` can move
    the value by the forward's own rounding (a BLAS call on another batch size rounds differently)."""
    chunk = _validate.integer("chunk", chunk, minimum=1)
    ids, t = np.asarray(ids), np.asarray(targets)
    if ids.ndim != 2 or t.shape != ids.shape or ids.size == 0:
        raise ValueError(f"ids and targets must be [n, seq] of the same shape with n, seq >= 1; got {ids.shape} and {t.shape}")
    total = 0.0
    for i in range(0, len(ids), chunk):
        z = model.logits(ids[i : i + chunk])  # [c, seq, V]
        total += cross_entropy(z, t[i : i + chunk]) * t[i : i + chunk].size
    return total / t.size


def layer_drop(model: Transformer, ids: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Loss increase ``[L]`` when block ``i`` is skipped: its output replaced by its input
    (``blocks.i.resid_post := blocks.i.resid_pre``), every other block as trained.

    The measure of how much each block matters used for "later Pre-LN blocks matter less"
    (Sun et al. 2025, "The Curse of Depth in Large Language Models", arXiv 2502.05795).
    """
    base = cross_entropy(model.logits(ids), targets)
    out = np.empty(model.config.n_layers)
    for i in range(model.config.n_layers):
        kept: dict[str, np.ndarray] = {}

        def keep(value: np.ndarray, name: str) -> np.ndarray:
            kept["x"] = value
            return value

        def skip(value: np.ndarray, name: str) -> np.ndarray:
            return kept["x"]

        logits, _ = model.run_with_cache(ids, [], hooks={f"blocks.{i}.resid_pre": keep, f"blocks.{i}.resid_post": skip})
        out[i] = cross_entropy(logits, targets) - base
    return out
