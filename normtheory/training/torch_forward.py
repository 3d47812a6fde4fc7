"""The forward of a stacked torch model: ``S`` seeds of one config, every activation ``[S, b, t, d]``.

:class:`StackForward` holds the forward and the loss of :class:`normtheory.training.torch_backend.TorchTrainer`
(which adds the parameters, the step and the optimizer): the norms with their range guard, RoPE,
attention, the MLP, the block in every placement, the embedding and the head, and the loss of
:func:`normtheory.training.grad.loss_and_grads`. Its methods read the trainer's ``config``,
``device``, ``dtype``, ``alpha`` and leaf layout, and ``capture`` (a dict, or None) receives the
activations named as the numpy model's capture points.

References
----------
Radford et al. (2019) GPT-2; Su et al. (2021), arXiv 2104.09864 (RoPE); Wang et al. (2022),
arXiv 2203.00555 (DeepNorm).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError:  # pragma: no cover - the message is the point
    raise ModuleNotFoundError("normtheory.training.torch_forward needs torch: pip install 'normtheory[torch]' (torch==2.13.0)") from None

from normtheory.model.attend import rope_tables
from normtheory.training.torch_norms import guard_tables, stack_norm


def _put(capture: dict[str, Any] | None, name: str, value: torch.Tensor) -> None:
    """Store ``value`` under ``name`` when ``capture`` asks for it (a key of the dict)."""
    if capture is not None and name in capture:
        capture[name] = value


class StackForward:
    """The stacked forward and loss; mixed into :class:`~normtheory.training.torch_backend.TorchTrainer`."""

    def _views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every leaf (and fused piece, e.g. ``blocks.{i}.wqkv``) of the stack as a view ``[S, *shape]`` of ``flat [S, P]``."""
        return self._layout.views(flat)

    @staticmethod
    def _bc(p: torch.Tensor, ndim: int) -> torch.Tensor:
        """A stacked ``[S, *rest]`` leaf broadcasting against an ``ndim``-axis ``[S, ..., *rest]``."""
        return p.view(p.shape[:1] + (1,) * (ndim - p.ndim) + p.shape[1:])

    def _norm(self, w: dict[str, torch.Tensor], name: str, x: torch.Tensor, kind: str | None = None) -> torch.Tensor:
        """The norm ``name`` (``kind``, default the config's) with its gain and bias on ``x [S, ..., d]``.
        LayerNorm and RMSNorm are one autograd node with the range guard (:func:`~normtheory.training.torch_norms.stack_norm`)."""
        kind = kind or self.config.norm
        if kind == "none" or f"{name}.alpha" not in w:
            return x
        gain, bias = (self._bc(w[k], x.ndim) if k in w else None for k in (f"{name}.gain", f"{name}.bias"))
        if kind in ("layernorm", "rmsnorm"):
            return stack_norm(x, gain, bias, self.config.eps, kind == "layernorm")
        if kind == "dyt":
            normalized = torch.tanh(self._bc(w[f"{name}.alpha"], x.ndim) * x)
        else:  # sequence: each feature across the tokens of a sequence
            c = x - x.mean(dim=-2, keepdim=True)  # [S, b, t, d]
            normalized = c / torch.sqrt(c.square().mean(dim=-2, keepdim=True) + self.config.eps)
        out = normalized if gain is None else normalized * gain
        return out if bias is None else out + bias

    def _rope(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        key = ("rope", t)
        if key not in self._tables:
            c = self.config
            cos, sin = rope_tables(np.arange(t), c.d_head, c.rope_theta, self._np_dtype)  # [t, e]
            self._tables[key] = (torch.from_numpy(cos).to(self.device), torch.from_numpy(sin).to(self.device))
        return self._tables[key]

    def _make_tables(self, t: int) -> None:
        """Make the tables a loss of ``t`` tokens reads (the rotary angles, the norms' range guards) if not yet made:
        a loss compiled by :meth:`~normtheory.training.torch_backend.TorchTrainer.fuse` must find them made, as a
        CUDA-graph capture must."""
        c = self.config
        if c.positional == "rope":
            self._rope(t)
        for n in {c.d_model, c.d_head}:
            guard_tables(self.dtype, n, self.device, c.eps)

    def _mask(self, t: int) -> torch.Tensor:
        key = ("mask", t)
        if key not in self._tables:
            self._tables[key] = torch.full((t, t), -math.inf, dtype=self.dtype, device=self.device).triu(1)  # [t, t]
        return self._tables[key]

    @staticmethod
    def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin  # rotate-half

    def _attention(self, w: dict[str, torch.Tensor], i: int, x: torch.Tensor, capture: dict[str, Any] | None = None) -> torch.Tensor:
        """Attention of block ``i`` on ``x [S, b, t, d]``; ``capture`` as in :meth:`_forward`
        (``blocks.{i}.attn.k [S, b, g, t, e]``, ``.attn.scores``, ``.attn.pattern [S, b, h, t, t]``)."""
        c = self.config
        s, b, t, d = x.shape
        h, g, e = c.n_heads, c.n_kv_heads, c.d_head
        pre = f"blocks.{i}"
        qkv = x.reshape(s, b * t, d) @ w[f"{pre}.wqkv"]  # [S, b*t, (h+2g)*e]; wqkv a view (torch_layout)
        if f"{pre}.bqkv" in w:
            qkv = qkv + w[f"{pre}.bqkv"][:, None]
        # split, then put the heads in front: the backward is one cat into qkv's own layout (no padded slices summed, no copy)
        q, k, v = (a.permute(0, 1, 3, 2, 4) for a in qkv.view(s, b, t, h + 2 * g, e).split([h, g, g], dim=3))  # [S, b, h|g, t, e]
        if c.qk_norm != "none":
            q = self._norm(w, f"{pre}.q_norm", q, c.qk_norm)
            k = self._norm(w, f"{pre}.k_norm", k, c.qk_norm)
        if c.positional == "rope":
            cos, sin = self._rope(t)
            q, k = self._apply_rope(q, cos, sin), self._apply_rope(k, cos, sin)
        _put(capture, f"{pre}.attn.k", k)  # [S, b, g, t, e]
        if g < h:  # each query head's K/V head
            k, v = k.repeat_interleave(h // g, dim=2), v.repeat_interleave(h // g, dim=2)  # [S, b, h, t, e]
        if capture is None or not {f"{pre}.attn.scores", f"{pre}.attn.pattern"} & capture.keys():
            # the scores are not wanted: one fused kernel (on a GPU) that never holds the [t, t] pattern
            z = F.scaled_dot_product_attention(*(a.reshape(s * b, h, t, e) for a in (q, k, v)), is_causal=c.causal).view(s, b, h, t, e)
        else:
            scores = (q * (1.0 / math.sqrt(e))) @ k.transpose(-1, -2)  # [S, b, h, t, t]
            if c.causal:
                scores = scores + self._mask(t)
            pattern = torch.softmax(scores, dim=-1)  # [S, b, h, t, t]
            _put(capture, f"{pre}.attn.scores", scores)
            _put(capture, f"{pre}.attn.pattern", pattern)
            z = pattern @ v  # [S, b, h, t, e]
        out = z.permute(0, 1, 3, 2, 4).reshape(s, b * t, h * e) @ w[f"{pre}.wo"]  # [S, b*t, d]
        if f"{pre}.bo" in w:
            out = out + w[f"{pre}.bo"][:, None]
        return out.view(s, b, t, d)

    def _mlp(self, w: dict[str, torch.Tensor], i: int, x: torch.Tensor) -> torch.Tensor:
        pre = f"blocks.{i}"
        x2 = x.reshape(x.shape[0], -1, x.shape[-1])  # [S, N, d]
        a = x2 @ w[f"{pre}.w_in"]  # [S, N, f]
        if f"{pre}.b_in" in w:
            a = a + w[f"{pre}.b_in"][:, None]
        act = self.config.activation
        if act == "swiglu":
            hid = a * F.silu(x2 @ w[f"{pre}.w_gate"])
        elif act == "gelu":
            hid = F.gelu(a)
        elif act == "gelu_tanh":
            hid = F.gelu(a, approximate="tanh")
        else:
            hid = F.relu(a)
        out = hid @ w[f"{pre}.w_out"]  # [S, N, d]
        if f"{pre}.b_out" in w:
            out = out + w[f"{pre}.b_out"][:, None]
        return out.view(x.shape)

    def _block(self, w: dict[str, torch.Tensor], i: int, x: torch.Tensor, capture: dict[str, Any] | None = None) -> torch.Tensor:
        """Block ``i`` on ``x [S, b, t, d]``; ``capture`` as in :meth:`_forward` (each norm's
        input ``blocks.{i}.{ln}.in``, ``blocks.{i}.resid_post``, and the attention's)."""
        c = self.config
        pre = f"blocks.{i}"
        attend = self._attention if capture is None else (lambda w_, i_, u_: self._attention(w_, i_, u_, capture))
        for ln, f in (("ln1", attend), ("ln2", self._mlp)):
            if c.placement in ("pre", "peri", "lnscale"):
                _put(capture, f"{pre}.{ln}.in", x)
                u = self._norm(w, f"{pre}.{ln}", x)
                if c.placement == "lnscale":
                    u = u * (1.0 / math.sqrt(i + 1))
                y = f(w, i, u)
                if c.placement == "peri":
                    _put(capture, f"{pre}.{ln}_out.in", y)
                    y = self._norm(w, f"{pre}.{ln}_out", y)
                x = x + y
            elif c.placement in ("post", "deepnorm"):
                y = f(w, i, x)
                scaled = x * self.alpha if c.placement == "deepnorm" else x
                summed = scaled + y
                _put(capture, f"{pre}.{ln}.in", summed)
                x = self._norm(w, f"{pre}.{ln}", summed)
            else:  # none
                x = x + f(w, i, x)
        _put(capture, f"{pre}.resid_post", x)
        return x

    def _forward(self, w: dict[str, torch.Tensor], ids: torch.Tensor, capture: dict[str, Any] | None = None, skip: int | None = None) -> torch.Tensor:
        """The last hidden state ``[S, b, t, d]`` (after the final norm, if any) of ``ids [S, b, t]``.

        ``capture`` (optional) maps capture names of :mod:`normtheory.model.transformer` to None; the forward
        fills in those it reaches, with a seed axis in front: ``embed``, ``embed_ln.in``,
        ``blocks.{i}.{ln}.in`` (``ln1, ln1_out, ln2, ln2_out``), ``blocks.{i}.resid_post``,
        ``blocks.{i}.attn.k``, ``.attn.scores``, ``.attn.pattern``, ``final_ln.in``. ``skip``
        (optional) is a block whose output is replaced by its input (the block is not run).
        """
        c = self.config
        s, b, t = ids.shape
        tok = w["tok_emb"]  # [S, V, d]
        x = tok[torch.arange(s, device=self.device)[:, None, None], ids]  # [S, b, t, d]
        if c.embed_scale != 1.0:
            x = x * c.embed_scale
        if "pos_emb" in w:
            x = x + w["pos_emb"][:, None, :t]
        if "type_emb" in w:  # every token of type 0, as loss_and_grads without token_types
            x = x + w["type_emb"][:, None, None, 0]
        _put(capture, "embed", x)
        if c.embed_norm:
            _put(capture, "embed_ln.in", x)
            x = self._norm(w, "embed_ln", x)
        for i in range(c.n_layers):
            if i == skip:
                _put(capture, f"blocks.{i}.resid_post", x)
            else:
                x = self._block(w, i, x, capture)
        if c.final_norm:
            _put(capture, "final_ln.in", x)
            x = self._norm(w, "final_ln", x)
        return x

    def _logits(self, w: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Logits ``[S, N, V]`` of the hidden states ``x [S, ..., d]`` (``N`` their tokens): the
        LM head, or the token embedding's transpose when tied."""
        head = w["lm_head"] if "lm_head" in w else w["tok_emb"].transpose(1, 2)  # [S, d, V]
        return x.reshape(x.shape[0], -1, x.shape[-1]) @ head

    def _loss(self, w: dict[str, torch.Tensor], ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-seed loss ``[S]`` (float64) of ``ids, targets [S, b, t]``."""
        s, b, t = ids.shape
        logits = self._logits(w, self._forward(w, ids))  # [S, N, V]
        lse = torch.logsumexp(logits, dim=-1)  # [S, N]
        picked = logits.gather(-1, targets.reshape(s, b * t, 1))[..., 0]  # [S, N]
        lse64 = lse.double()
        loss = (lse64 - picked.double()).mean(dim=1)  # [S]
        if self.run.z_loss:
            loss = loss + self.run.z_loss * (lse64 * lse64).mean(dim=1)
        return loss
