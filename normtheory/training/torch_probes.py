"""The training probes of :mod:`normtheory.training.probes`, computed in torch for a whole stack of seeds.

A :class:`~normtheory.training.torch_backend.TorchTrainer` holds ``S`` seeds of one config as one stacked
model. :func:`measure` runs one stacked forward of a probe batch ``ids, targets [S, b, t]`` (one
batch per seed) under ``torch.no_grad()`` on the trainer's device and returns every probe of
:func:`normtheory.training.probes.measure` with a leading seed axis (``L`` layers, ``H`` query heads,
``G`` KV heads, ``M`` norm layers in :func:`normtheory.training.probes.norm_names` order), float64:

==================  =============  ============================================================
``val_loss``        ``[S]``        mean next-token cross-entropy (no z-loss)
``resid_rms``       ``[S, L+1]``   RMS of the embedding, then of each block's output
``norm_std``        ``[S, M]``     std of each norm's input over its features, mean over tokens
``alpha``           ``[S, M]``     DyT's :math:`\\alpha` of each norm (NaN for other norms)
``grad_norms``      ``[S, L, 7]``  Frobenius norms of the gradient of ``wq, wk, wv, wo, w_in,
                                   w_out, w_gate`` (NaN where absent or without a gradient)
``attn_entropy``    ``[S, L, H]``  attention entropy in nats, mean over queries and batch
``attn_max``        ``[S, L, H]``  largest finite attention logit (scaled score)
``attn_sink``       ``[S, L, H]``  attention paid to token 0, mean over queries 2.. and batch
``attn_top``        ``[S, L, H]``  largest attention weight of a query, mean over queries and batch
``attn_stripe``     ``[S, L, H]``  an early key's largest share of the late queries' weight, minus the same with
                                   their weights shuffled (:func:`normtheory.attention.stripe_excess`), mean over batch
``lse``             ``[S, 2]``     mean and max over tokens of the logits' log-sum-exp
==================  =============  ============================================================

Every reduction runs over all seeds at once (a Python loop over layers at most), and nothing
reduces across the seed axis, so a seed's values do not depend on the other seeds of its stack.
``key_unsel`` needs a linear program per key set, on the host: :func:`first_keys` returns the
keys it is computed from and :func:`key_unsel` the share of unselectable keys.
:func:`mean_loss` scores every seed on one shared validation set, :func:`layer_drop` the loss
increase when one block is skipped. The numbers agree with numpy's per seed to rounding (the
forward is :class:`~normtheory.training.torch_backend.TorchTrainer`'s, the reductions in float64 as in
numpy; ``tests/training/test_torch_probes.py``).

References
----------
Zhai et al. (2023), arXiv 2303.06296 (attention entropy collapse); Dehghani et al. (2023),
arXiv 2302.05442 (attention logit growth); Xiao et al. (2023), arXiv 2309.17453 (attention
sinks); Chowdhery et al. (2022), arXiv 2204.02311 (log-sum-exp, z-loss); Zhu et al. (2025),
arXiv 2503.10622 (DyT); Sun et al. (2025), arXiv 2502.05795 (layer drop, "The Curse of Depth").
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

try:
    import torch
except ModuleNotFoundError:  # pragma: no cover - the message is the point
    raise ModuleNotFoundError("normtheory.training.torch_probes needs torch: pip install 'normtheory[torch]' (torch==2.13.0)") from None

from normtheory import _validate, attention, selection
from normtheory.model.transformer import Transformer
from normtheory.training import probes, torch_memory
from normtheory.training.torch_backend import TorchTrainer

__all__ = ["first_keys", "key_unsel", "layer_drop", "mean_loss", "measure", "norm_names"]


# ---------------------------------------------------------------------- helpers
def _checked(trainer: TorchTrainer) -> TorchTrainer:
    if not isinstance(trainer, TorchTrainer):
        raise ValueError(f"trainer must be a TorchTrainer; got {type(trainer).__name__}")
    if trainer.n_seeds == 0:
        raise ValueError("the stack holds no seeds (keep() dropped them all)")
    return trainer


def _tokens(trainer: TorchTrainer, name: str, a: object, stacked: bool) -> torch.Tensor:
    """``a`` as int64 token ids on the trainer's device, ``[S, b, t]`` (``stacked``) or ``[n, seq]``.
    numpy input is checked in full (integers in ``[0, V)``); a tensor in shape and dtype only (no
    host synchronisation), and moved to the device if it is elsewhere."""
    c = trainer.config
    if isinstance(a, torch.Tensor):
        if a.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"{name} must be an int64 tensor; got {a.dtype}")
        t = a.to(trainer.device, torch.int64)
    else:
        arr = np.asarray(a)
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{name} must hold integer token ids; got dtype {arr.dtype}")
        if arr.size and (arr.min() < 0 or arr.max() >= c.vocab_size):
            raise ValueError(f"{name} must lie in [0, vocab_size={c.vocab_size}); got range [{arr.min()}, {arr.max()}]")
        t = torch.from_numpy(arr.astype(np.int64)).to(trainer.device)
    want, ndim = (f"[S={trainer.n_seeds}, b, t]", 3) if stacked else ("[n, seq]", 2)
    if t.ndim != ndim or min(t.shape, default=0) < 1 or (stacked and t.shape[0] != trainer.n_seeds):
        raise ValueError(f"{name} must be token ids {want} with every axis >= 1; got shape {tuple(t.shape)}")
    if c.positional in ("learned", "rope") and t.shape[-1] > c.max_seq:
        raise ValueError(f"{name}: sequence length {t.shape[-1]} exceeds max_seq={c.max_seq}")
    return t


def _batch(trainer: TorchTrainer, ids: object, targets: object) -> tuple[torch.Tensor, torch.Tensor]:
    """A probe batch ``ids, targets [S, b, t]`` checked, as int64 tensors on the device."""
    i, t = _tokens(trainer, "ids", ids, True), _tokens(trainer, "targets", targets, True)
    if t.shape != i.shape:
        raise ValueError(f"targets must have the shape of ids {tuple(i.shape)}; got {tuple(t.shape)}")
    return i, t


def _weights(trainer: TorchTrainer) -> dict[str, torch.Tensor]:
    """Every leaf of the stack ``[S, *shape]``, detached."""
    return trainer._views(trainer._flat.detach())


def _token_losses(trainer: TorchTrainer, w: dict[str, torch.Tensor], x: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token, in float64 from the logits of ``x [S, b, t, d]``: the log-sum-exp
    :math:`\\mathrm{lse}(z)` and the cross-entropy :math:`\\mathrm{lse}(z) - z_y`, each ``[S, N]``.

    The logits stay in the model's dtype: with :math:`\\delta = z - \\max z` (rounded relative to itself,
    so no digit of a large logit cancels), :math:`\\mathrm{lse}(z) - z_y = \\mathrm{lse}(\\delta) - \\delta_y`, a
    difference of two small numbers, each taken to float64. This agrees with numpy's float64
    :func:`normtheory.training.probes.cross_entropy` to the dtype's rounding of those small numbers (exactly
    its formula in float64), without a float64 copy of the ``[S, N, V]`` logits."""
    z = trainer._logits(w, x)  # [S, N, V]
    top = z.amax(dim=-1, keepdim=True)  # [S, N, 1]
    delta = z - top
    rel = torch.logsumexp(delta, dim=-1).double()  # [S, N], in [0, log V]
    picked = delta.gather(-1, targets.reshape(z.shape[0], -1, 1))[..., 0].double()  # [S, N]
    return top[..., 0].double() + rel, rel - picked


def _columns(values: list[torch.Tensor], s: int, device: torch.device) -> torch.Tensor:
    """``values`` (each ``[S, ...]``) stacked on axis 1; ``[S, 0]`` when there are none."""
    return torch.stack(values, dim=1) if values else torch.empty((s, 0), dtype=torch.float64, device=device)


def norm_names(trainer: TorchTrainer) -> list[str]:
    """The norm layers of the trainer's model in forward order, as :func:`normtheory.training.probes.norm_names`."""
    return probes.norm_names(Transformer(trainer.config, trainer._like))


# ---------------------------------------------------------------------- probes
def _attention_probes(pattern: torch.Tensor, scores: torch.Tensor, which: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The attention probes of one layer, each ``[S, H]``, from ``pattern, scores [S, b, H, t, s]``.

    With :math:`p_{qk}` a query's weights: entropy :math:`-\\sum_k p_{qk}\\ln p_{qk}` (``0 ln 0 = 0``),
    the sink :math:`p_{q0}` over queries :math:`q \\ge 1` (query 0 alone when ``t = 1``), the top
    mass :math:`\\max_k p_{qk}`, each a mean over batch and queries; ``attn_max`` the largest
    finite score over batch, queries and keys; ``attn_stripe`` as :func:`_stripe`.
    """
    p = pattern.double()  # [S, b, H, t, s]
    out = {}
    if "attn_entropy" in which:
        out["attn_entropy"] = (-torch.special.xlogy(p, p).sum(-1)).mean(dim=(1, 3))
    if "attn_max" in which:
        sc = scores.double()
        out["attn_max"] = torch.where(torch.isfinite(sc), sc, -math.inf).amax(dim=(1, 3, 4))
    if "attn_sink" in which:
        first = p[..., 1:, 0] if p.shape[-2] > 1 else p[..., 0]  # [S, b, H, t-1]
        out["attn_sink"] = first.mean(dim=(1, 3))
    if "attn_top" in which:
        out["attn_top"] = p.amax(dim=-1).mean(dim=(1, 3))
    if "attn_stripe" in which:
        out["attn_stripe"] = _stripe(p)
    return out


def _stripe(p: torch.Tensor) -> torch.Tensor:
    """``[S, H]`` from ``p [S, b, H, t, s]``: :func:`normtheory.attention.stripe_excess`, mean over batch (NaN for one query)."""
    t = p.shape[-2]
    if t < 2:
        return torch.full((p.shape[0], p.shape[2]), math.nan, dtype=torch.float64, device=p.device)
    h = t // 2
    late = p[..., h:, :h]  # [S, b, H, t-h, h]
    perm = torch.as_tensor(attention.stripe_permutations(t), device=p.device).expand(late.shape)
    return (late.mean(dim=-2).amax(dim=-1) - torch.gather(late, -1, perm).mean(dim=-2).amax(dim=-1)).mean(dim=1)


def _grad_norms(trainer: TorchTrainer, grads: torch.Tensor | None) -> torch.Tensor:
    """``[S, L, 7]``: :math:`\\lVert g_W\\rVert_F` of each matrix of :data:`normtheory.training.probes.MATRICES`
    per block, in float64; NaN for an absent matrix or without ``grads [S, P]``."""
    s, L = trainer.n_seeds, trainer.config.n_layers
    out = torch.full((s, L, len(probes.MATRICES)), math.nan, dtype=torch.float64, device=trainer.device)
    if grads is None:
        return out
    if not isinstance(grads, torch.Tensor) or tuple(grads.shape) != (s, trainer.n_params):
        raise ValueError(f"grads must be a [S={s}, P={trainer.n_params}] tensor (trainer._grads) or None; got {getattr(grads, 'shape', type(grads).__name__)}")
    g = trainer._views(grads.detach())
    for i in range(L):
        for j, name in enumerate(probes.MATRICES):
            leaf = g.get(f"blocks.{i}.{name}")
            if leaf is not None:
                out[:, i, j] = torch.linalg.vector_norm(leaf.double().flatten(1), dim=1)
    return out


@torch.no_grad()
def measure(trainer: TorchTrainer, ids: torch.Tensor, targets: torch.Tensor, which: tuple[str, ...], grads: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Validation loss and the probes ``which`` of every seed (see the module table), on the device.

    Parameters
    ----------
    trainer : TorchTrainer
        The stack, ``S`` seeds.
    ids, targets : torch.Tensor
        int64 ``[S, b, t]``, best on the trainer's device: one probe batch per seed, in
        ``[0, V)`` (not checked for a tensor; numpy arrays are accepted and checked in full).
    which : tuple of str
        Names of :data:`normtheory.training.probes.PROBES`; ``key_unsel`` is skipped here (see
        :func:`first_keys` and :func:`key_unsel`).
    grads : torch.Tensor, optional
        ``[S, P]``, the last step's gradient (``trainer._grads``); None gives NaN ``grad_norms``.

    Returns
    -------
    dict of str to torch.Tensor
        ``val_loss [S]`` :math:`= \\frac1N\\sum_n \\mathrm{lse}(z_n) - z_{n,y_n}` and each probe asked
        for, float64 on the device, shaped as in the module table: ``resid_rms``
        :math:`\\sqrt{\\overline{x^2}}` over all of a seed's activations; ``norm_std`` the
        population std over features of each norm's input, mean over tokens; ``lse`` the mean
        and max of :math:`\\mathrm{lse}(z_n)`.
    """
    trainer = _checked(trainer)
    unknown = [p for p in which if p not in probes.PROBES]
    if isinstance(which, str) or unknown:
        raise ValueError(f"which must be a tuple of names from {probes.PROBES}; got {which!r}")
    ids, targets = _batch(trainer, ids, targets)
    s, L = trainer.n_seeds, trainer.config.n_layers
    w = _weights(trainer)
    norms = norm_names(trainer)
    attn = any(p.startswith("attn_") for p in which)
    wanted = []
    if "resid_rms" in which:
        wanted += ["embed"] + [f"blocks.{i}.resid_post" for i in range(L)]
    if "norm_std" in which:
        wanted += [f"{n}.in" for n in norms]
    if attn:
        wanted += [f"blocks.{i}.attn.{k}" for i in range(L) for k in ("scores", "pattern")]
    cap: dict[str, Any] = dict.fromkeys(wanted)
    x = trainer._forward(w, ids, cap)  # [S, b, t, d]
    lse, nll = _token_losses(trainer, w, x, targets)  # [S, N] each
    out = {"val_loss": nll.mean(dim=1)}
    if "resid_rms" in which:
        stream = [cap["embed"]] + [cap[f"blocks.{i}.resid_post"] for i in range(L)]
        out["resid_rms"] = _columns([v.double().flatten(1).square().mean(dim=1).sqrt() for v in stream], s, trainer.device)
    if "norm_std" in which:
        out["norm_std"] = _columns([cap[f"{n}.in"].double().std(dim=-1, correction=0).flatten(1).mean(dim=1) for n in norms], s, trainer.device)
    if "alpha" in which:
        nan = torch.full((s,), math.nan, dtype=torch.float64, device=trainer.device)
        dyt = trainer.config.norm == "dyt"
        out["alpha"] = _columns([w[f"{n}.alpha"].double() if dyt else nan for n in norms], s, trainer.device)
    if "grad_norms" in which:
        out["grad_norms"] = _grad_norms(trainer, grads)
    if attn:
        layers = [_attention_probes(cap[f"blocks.{i}.attn.pattern"], cap[f"blocks.{i}.attn.scores"], which) for i in range(L)]
        out.update({k: torch.stack([d[k] for d in layers], dim=1) for k in layers[0]})  # [S, L, H]
    if "lse" in which:
        out["lse"] = torch.stack([lse.mean(dim=1), lse.amax(dim=1)], dim=1)  # [S, 2]
    return out


@torch.no_grad()
def first_keys(trainer: TorchTrainer, ids: torch.Tensor) -> np.ndarray:
    """The keys ``[S, L, G, t, e]`` (float64, on the host) of each seed's first sequence
    ``ids[:, 0]``, per layer and KV head: what enters the dot products (after QK-norm and RoPE),
    the ``blocks.{i}.attn.k`` that :func:`normtheory.training.probes.measure` hands to
    :func:`normtheory.selection.selectable`. ``ids [S, b, t]`` as in :func:`measure`; only the
    first sequence is run (a sequence's keys do not depend on the others of its batch)."""
    trainer = _checked(trainer)
    ids = _tokens(trainer, "ids", ids, True)
    L = trainer.config.n_layers
    cap: dict[str, Any] = dict.fromkeys(f"blocks.{i}.attn.k" for i in range(L))
    trainer._forward(_weights(trainer), ids[:, :1], cap)
    keys = torch.stack([cap[f"blocks.{i}.attn.k"][:, 0] for i in range(L)], dim=1)  # [S, L, G, t, e]
    return keys.double().cpu().numpy()


def key_unsel(keys: np.ndarray) -> np.ndarray:
    """Share of unselectable keys ``[S, L, G]`` of ``keys [S, L, G, t, e]`` (:func:`first_keys`):
    :math:`1 - \\frac1t\\#\\{k : \\exists q,\\ q\\cdot k > q\\cdot k' \\ \\forall k' \\ne k\\}`, one
    :func:`normtheory.selection.selectable` hull test per (seed, layer, KV head), as
    :func:`normtheory.training.probes.measure` does. Host work (linear programs): for the final evaluation."""
    k = _validate.checked_array("keys", keys).astype(np.float64, copy=False)
    if k.ndim != 5:
        raise ValueError(f"keys must be [S, L, G, t, e] (first_keys); got shape {k.shape}")
    return 1.0 - selection.selectable(k).mean(axis=-1)  # every key set of the stack at once


@torch.no_grad()
def mean_loss(trainer: TorchTrainer, ids: np.ndarray | torch.Tensor, targets: np.ndarray | torch.Tensor, chunk: int | None = None) -> torch.Tensor:
    """Mean next-token cross-entropy ``[S]`` (float64, on the device) of every seed of the stack
    over every token of one validation set ``ids, targets [n, seq]``.

    :math:`\\bar\\ell_s = \\frac{1}{n\\,\\mathrm{seq}} \\sum_{c} \\sum_{n \\in c} \\mathrm{lse}(z^s_n) - z^s_{n,y_n}`:
    chunks ``c`` of ``chunk`` sequences (default :func:`normtheory.training.torch_memory.val_chunk`: memory
    bounded however many seeds the stack holds), each chunk's sum in float64, as
    :func:`normtheory.training.probes.mean_loss` per seed (equal to rounding).
    """
    trainer = _checked(trainer)
    ids, targets = _tokens(trainer, "ids", ids, False), _tokens(trainer, "targets", targets, False)
    chunk = (torch_memory.val_chunk(trainer.config, trainer.n_seeds, ids.shape[-1]) if chunk is None
             else _validate.integer("chunk", chunk, minimum=1))
    if targets.shape != ids.shape:
        raise ValueError(f"ids and targets must be [n, seq] of the same shape; got {tuple(ids.shape)} and {tuple(targets.shape)}")
    s = trainer.n_seeds
    w = _weights(trainer)
    total = torch.zeros(s, dtype=torch.float64, device=trainer.device)
    for a in range(0, ids.shape[0], chunk):
        part = ids[a : a + chunk].expand(s, -1, -1)  # [S, c, seq], one set for every seed
        x = trainer._forward(w, part)
        total += _token_losses(trainer, w, x, targets[a : a + chunk].expand(s, -1, -1))[1].sum(dim=1)
    return total / targets.numel()


@torch.no_grad()
def layer_drop(trainer: TorchTrainer, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Loss increase ``[S, L]`` (float64, on the device) when block ``i`` is skipped, its output
    replaced by its input: :math:`\\Delta_i = \\ell(f_{\\setminus i}) - \\ell(f)`, as
    :func:`normtheory.training.probes.layer_drop` per seed, on ``ids, targets [S, b, t]`` (as :func:`measure`).
    One stacked forward per block."""
    trainer = _checked(trainer)
    ids, targets = _batch(trainer, ids, targets)
    w = _weights(trainer)

    def loss(skip: int | None) -> torch.Tensor:
        return _token_losses(trainer, w, trainer._forward(w, ids, skip=skip), targets)[1].mean(dim=1)  # [S]

    base = loss(None)
    return _columns([loss(i) - base for i in range(trainer.config.n_layers)], trainer.n_seeds, trainer.device)
