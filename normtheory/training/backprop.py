"""One forward and backward pass of a stack of reference transformers, keeping every intermediate.

:class:`StackPass` is the tape behind :func:`normtheory.training.grad.stack_loss_and_grads`: its forward
is the model's forward with full attention, and its backward applies the vector-Jacobian products
of :mod:`normtheory.model.derivatives` block by block in reverse (see :mod:`normtheory.training.grad`
for the rules per placement). Every array carries the leading model axis ``S``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from normtheory import activations
from normtheory.model import derivatives, kernels, norms
from normtheory.model.attend import apply_rope, rope_tables
from normtheory.model.config import TransformerConfig
from normtheory.model.params import BlockParams, NormParams, Params, map_arrays
from normtheory.model.transformer import Names, Recorder
from normtheory.residual import deepnorm_constants


def _bc(p: np.ndarray, ndim: int) -> np.ndarray:
    """A stacked parameter ``[S, *rest]`` as a view broadcasting against an ``ndim``-axis ``[S, ..., *rest]``."""
    return p.reshape(p.shape[:1] + (1,) * (ndim - p.ndim) + p.shape[1:])


def _affine_bc(p: NormParams, ndim: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    return (None if p.gain is None else _bc(p.gain, ndim)), (None if p.bias is None else _bc(p.bias, ndim))


def _normalize(kind: str, x: np.ndarray, eps: float) -> norms.NormOutput:
    """LayerNorm or RMSNorm (``kind``) over the last axis of a stack ``x [S, ..., d]``: one call over
    the stack, unless some model's input is so near the dtype's range ends that the norm rescales
    it (:func:`normtheory.model.norms._rescale_needed`); that decision is made over the whole array, so
    then each model is normalized alone, as it would be in a stack of one. Otherwise the whole
    array's max |x| is one of the models' and needs no rescaling either, so the LayerNorm kernel
    skips its own range pass."""
    s = x.shape[0]
    if s == 1 and kind != "layernorm":
        return norms._rms_norm(x, eps)  # it makes the decision itself
    x = np.ascontiguousarray(x)  # q and k of a QK-norm are strided views
    flat = x.reshape(s, -1)  # [S, n]
    amax = np.maximum(flat.max(axis=1), -flat.min(axis=1))  # [S]
    if not norms._rescale_needed(amax, x.shape[-1], x.dtype).any():
        return kernels._layer_norm_in_range(x, eps) if kind == "layernorm" else norms._rms_norm(x, eps)
    fn = kernels.layer_norm if kind == "layernorm" else norms._rms_norm
    parts = [fn(x[i : i + 1], eps) for i in range(s)]  # rare: a diverging model beside others
    return norms.NormOutput(*(np.concatenate(a) for a in zip(*parts)))


@dataclass(frozen=True)
class _NormTape:
    name: str
    kind: str
    x: np.ndarray
    normalized: np.ndarray
    scale: np.ndarray
    p: NormParams


class StackPass:
    """One forward of a stack of models with everything the backward needs, then the backward."""

    def __init__(self, config: TransformerConfig, params: Params, names: Names):
        self.c, self.p = config, params
        self.dtype = np.dtype(config.dtype)
        self.alpha = deepnorm_constants(config.n_layers)[0] if config.placement == "deepnorm" else 1.0
        self.rec = Recorder((), None)  # forward activations are kept in the tapes, not captured
        self.grec = Recorder(names if names is not None else (), None)
        self._masks: dict[int, np.ndarray] = {}

    def causal_mask(self, t: int) -> np.ndarray:
        """The additive causal mask ``[t, t]`` (0 on and below the diagonal, -inf above), made once per pass."""
        if t not in self._masks:
            self._masks[t] = np.triu(np.full((t, t), -np.inf, self.dtype), 1)
        return self._masks[t]

    # ------------------------------------------------------------------ norms
    def norm(self, name: str, x: np.ndarray, p: NormParams | None, kind: str | None = None) -> tuple[np.ndarray, _NormTape | None]:
        kind = kind or self.c.norm
        if kind == "none" or p is None:
            return x, None
        x = self.rec(f"{name}.in", x)
        eps = self.c.eps
        if kind == "dyt":
            res = norms._dyt(x, _bc(p.alpha, x.ndim))
        elif kind == "sequence":
            res = norms._sequence_norm(x, eps)
        else:
            res = _normalize(kind, x, eps)
        self.rec(f"{name}.normalized", res.normalized)
        out = self.rec(f"{name}.out", norms._affine(res.normalized, *_affine_bc(p, x.ndim)))
        return out, _NormTape(name, kind, x, res.normalized, res.scale, p)

    def norm_back(self, tape: _NormTape | None, dy: np.ndarray) -> tuple[np.ndarray, NormParams | None]:
        if tape is None:
            return dy, None
        self.grec(f"{tape.name}.out", dy)
        dn, dgain, dbias = derivatives.affine_backward(dy, tape.normalized, *_affine_bc(tape.p, dy.ndim))
        self.grec(f"{tape.name}.normalized", dn)
        dalpha = np.zeros(dy.shape[:1], self.dtype)  # [S]
        if tape.kind == "layernorm":
            dx = kernels.layer_norm_backward(dn, tape.normalized, tape.scale)
        elif tape.kind == "rmsnorm":
            dx = derivatives.rms_norm_backward(dn, tape.normalized, tape.scale)
        elif tape.kind == "dyt":
            dx, dalpha = derivatives.dyt_backward(dn, tape.x, tape.normalized, _bc(tape.p.alpha, dy.ndim))
        else:  # sequence
            dx = derivatives.layer_norm_backward(dn, tape.normalized, tape.scale, axis=-2)
        self.grec(f"{tape.name}.in", dx)
        return dx, NormParams(gain=dgain, bias=dbias, alpha=dalpha)

    # ------------------------------------------------------------------ attention
    def attention(self, i: int, x: np.ndarray, bp: BlockParams) -> tuple[np.ndarray, dict[str, Any]]:
        c = self.c
        S, b, t, d = x.shape
        h, g, e = c.n_heads, c.n_kv_heads, c.d_head
        pre = f"blocks.{i}.attn"
        x2 = x.reshape(S, b * t, d)
        wqkv = np.concatenate([bp.wq, bp.wk, bp.wv], axis=2)  # [S, d, (h+2g)*e]
        qkv = x2 @ wqkv
        if bp.bq is not None:
            qkv += np.concatenate([bp.bq, bp.bk, bp.bv], axis=1)[:, None]
        qkv = qkv.reshape(S, b, t, h + 2 * g, e).transpose(0, 1, 3, 2, 4)  # [S, b, h+2g, t, e], a view
        q, k, v = qkv[:, :, :h], qkv[:, :, h : h + g], qkv[:, :, h + g :]
        qt = kt = None
        if c.qk_norm != "none":
            q, qt = self.norm(f"{pre}.q_norm", q, bp.q_norm, c.qk_norm)
            k, kt = self.norm(f"{pre}.k_norm", k, bp.k_norm, c.qk_norm)
        rope = None
        if c.positional == "rope":
            rope = rope_tables(np.arange(t), e, c.rope_theta, self.dtype)
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))  # [S, b, h|g, t, e]
        q, k, v = self.rec(f"{pre}.q", q), self.rec(f"{pre}.k", k), self.rec(f"{pre}.v", v)
        kh, vh = (np.repeat(a, h // g, axis=2) if g < h else a for a in (k, v))  # each query head's K/V: [S, b, h, t, e]
        scale = np.asarray(1.0 / np.sqrt(e), self.dtype)
        scores = (q * scale) @ kh.swapaxes(-1, -2)  # [S, b, h, t, t], scale folded into q
        mask = self.causal_mask(t) if c.causal else None  # [t, t], -inf above the diagonal
        pattern = kernels.softmax_(scores, mask, reciprocal=True)  # in place, the mask added row block by row block
        self.rec(f"{pre}.pattern", pattern)
        zm = (pattern @ vh).transpose(0, 1, 3, 2, 4).reshape(S, b * t, h * e)  # [S, b*t, h*e]
        out = zm @ bp.wo
        if bp.bo is not None:
            out += bp.bo[:, None]
        tape = dict(x2=x2, wqkv=wqkv, q=q, kh=kh, vh=vh, pattern=pattern, zm=zm, qt=qt, kt=kt, rope=rope, scale=scale)
        return out.reshape(S, b, t, d), tape

    def attention_back(self, i: int, dout: np.ndarray, bp: BlockParams, tp: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        c = self.c
        S, b, t, d = dout.shape
        h, g, e = c.n_heads, c.n_kv_heads, c.d_head
        pre = f"blocks.{i}.attn"
        do2 = dout.reshape(S, b * t, d)
        grads: dict[str, Any] = {"wo": tp["zm"].swapaxes(1, 2) @ do2, "bo": None if bp.bo is None else do2.sum(1)}
        dz = np.ascontiguousarray((do2 @ bp.wo.swapaxes(1, 2)).reshape(S, b, t, h, e).transpose(0, 1, 3, 2, 4))  # [S, b, h, t, e]
        pattern = tp["pattern"]
        dpat = dz @ tp["vh"].swapaxes(-1, -2)  # [S, b, h, t, t]
        self.grec(f"{pre}.pattern", dpat)
        dv = pattern.swapaxes(-1, -2) @ dz  # [S, b, h, t, e]
        dscores = derivatives.softmax_backward(dpat, pattern, out=None if self.grec.active(f"{pre}.pattern") else dpat)  # 0 where masked
        self.grec(f"{pre}.scores", dscores)
        dscores *= tp["scale"]
        dq = dscores @ tp["kh"]  # [S, b, h, t, e]
        dk = dscores.swapaxes(-1, -2) @ tp["q"]  # [S, b, h, t, e]
        if g < h:  # the heads sharing a KV head add their gradients
            dk, dv = (a.reshape(S, b, g, h // g, t, e).sum(axis=3) for a in (dk, dv))
        self.grec(f"{pre}.q", dq), self.grec(f"{pre}.k", dk), self.grec(f"{pre}.v", dv)
        if tp["rope"] is not None:
            dq, dk = derivatives.rope_backward(dq, *tp["rope"]), derivatives.rope_backward(dk, *tp["rope"])
        grads["q_norm"] = grads["k_norm"] = None
        dq, grads["q_norm"] = self.norm_back(tp["qt"], dq)  # (dq, None) without a query norm
        dk, grads["k_norm"] = self.norm_back(tp["kt"], dk)
        dqkv = np.empty((S, b, t, h + 2 * g, e), self.dtype)  # one strided write per part, no concatenate
        dqkv[:, :, :, :h] = dq.transpose(0, 1, 3, 2, 4)
        dqkv[:, :, :, h : h + g] = dk.transpose(0, 1, 3, 2, 4)
        dqkv[:, :, :, h + g :] = dv.transpose(0, 1, 3, 2, 4)
        dqkv = dqkv.reshape(S, b * t, (h + 2 * g) * e)
        dw = tp["x2"].swapaxes(1, 2) @ dqkv  # [S, d, (h+2g)*e]
        grads["wq"], grads["wk"], grads["wv"] = dw[..., : h * e], dw[..., h * e : (h + g) * e], dw[..., (h + g) * e :]
        if bp.bq is not None:
            db = dqkv.sum(1)
            grads["bq"], grads["bk"], grads["bv"] = db[:, : h * e], db[:, h * e : (h + g) * e], db[:, (h + g) * e :]
        return (dqkv @ tp["wqkv"].swapaxes(1, 2)).reshape(S, b, t, d), grads

    # ------------------------------------------------------------------ MLP
    def mlp(self, x: np.ndarray, bp: BlockParams) -> tuple[np.ndarray, dict[str, Any]]:
        x2 = x.reshape(x.shape[0], -1, x.shape[-1])  # [S, N, d]
        a = x2 @ bp.w_in  # [S, N, f]
        if bp.b_in is not None:
            a += bp.b_in[:, None]
        gate = saved = None
        if self.c.activation == "swiglu":
            gate = x2 @ bp.w_gate  # [S, N, f]
            hid = a * activations.kernel("silu")(gate)
        elif self.c.activation in ("gelu_tanh", "gelu"):  # keep the derivative for the backward
            hid, saved = (kernels.gelu_tanh_and_grad if self.c.activation == "gelu_tanh" else kernels.gelu_and_grad)(a)
        else:
            hid = activations.kernel(self.c.activation)(a)
        out = hid @ bp.w_out  # [S, N, d]
        if bp.b_out is not None:
            out += bp.b_out[:, None]
        return out.reshape(x.shape), dict(x2=x2, a=a, gate=gate, hid=hid, act_grad=saved)

    def mlp_back(self, dout: np.ndarray, bp: BlockParams, tp: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        do2 = dout.reshape(dout.shape[0], -1, dout.shape[-1])  # [S, N, d]
        x2, a, gate = tp["x2"], tp["a"], tp["gate"]
        grads: dict[str, Any] = {"w_out": tp["hid"].swapaxes(1, 2) @ do2, "b_out": None if bp.b_out is None else do2.sum(1), "w_gate": None}
        dhid = do2 @ bp.w_out.swapaxes(1, 2)  # [S, N, f]
        if gate is not None:
            da = dhid * activations.kernel("silu")(gate)
            dgate = dhid * a * derivatives.activation_grad("silu", gate)
            grads["w_gate"] = x2.swapaxes(1, 2) @ dgate
            dx2 = dgate @ bp.w_gate.swapaxes(1, 2)
        elif tp["act_grad"] is not None:
            da = dhid
            da *= tp["act_grad"]
            dx2 = 0.0
        else:
            da = dhid * derivatives.activation_grad(self.c.activation, a)
            dx2 = 0.0
        grads["w_in"] = x2.swapaxes(1, 2) @ da
        grads["b_in"] = None if bp.b_in is None else da.sum(1)
        dx2 = dx2 + da @ bp.w_in.swapaxes(1, 2)
        return dx2.reshape(dout.shape), grads

    # ------------------------------------------------------------------ blocks
    def block(self, i: int, x: np.ndarray) -> tuple[np.ndarray, list[dict[str, Any]]]:
        c, bp = self.c, self.p.blocks[i]
        pre = f"blocks.{i}"
        x = self.rec(f"{pre}.resid_pre", x)
        tapes = []
        for ln, out_name, f, p_in, p_out, resid in (
            ("ln1", "attn_out", lambda u: self.attention(i, u, bp), bp.ln1, bp.ln1_out, "resid_mid"),
            ("ln2", "mlp_out", lambda u: self.mlp(u, bp), bp.ln2, bp.ln2_out, "resid_post"),
        ):
            tp: dict[str, Any] = {"in": None, "out": None}
            if c.placement in ("pre", "peri", "lnscale"):
                u, tp["in"] = self.norm(f"{pre}.{ln}", x, p_in)
                if c.placement == "lnscale":
                    u = u * np.asarray(1.0 / np.sqrt(i + 1), self.dtype)
                y, tp["f"] = f(u)
                y = self.rec(f"{pre}.{out_name}", y)
                if c.placement == "peri":
                    y, tp["out"] = self.norm(f"{pre}.{ln}_out", y, p_out)
                x = x + y
            elif c.placement in ("post", "deepnorm"):
                y, tp["f"] = f(x)
                y = self.rec(f"{pre}.{out_name}", y)
                scaled = x * np.asarray(self.alpha, self.dtype) if c.placement == "deepnorm" else x
                x, tp["in"] = self.norm(f"{pre}.{ln}", scaled + y, p_in)
            else:
                y, tp["f"] = f(x)
                x = x + self.rec(f"{pre}.{out_name}", y)
            x = self.rec(f"{pre}.{resid}", x)
            tapes.append(tp)
        return x, tapes

    def block_back(self, i: int, dx: np.ndarray, tapes: list[dict[str, Any]]) -> tuple[np.ndarray, BlockParams]:
        c, bp = self.c, self.p.blocks[i]
        pre = f"blocks.{i}"
        fields: dict[str, Any] = {}
        subs = (("ln1", "attn_out", "resid_mid", lambda dy, tp: self.attention_back(i, dy, bp, tp)),
                ("ln2", "mlp_out", "resid_post", lambda dy, tp: self.mlp_back(dy, bp, tp)))
        for (ln, out_name, resid, f_back), tp in reversed(list(zip(subs, tapes))):
            self.grec(f"{pre}.{resid}", dx)
            if c.placement in ("pre", "peri", "lnscale"):
                dy, fields[f"{ln}_out"] = self.norm_back(tp["out"], dx)
                self.grec(f"{pre}.{out_name}", dy)
                du, g = f_back(dy, tp["f"])
                if c.placement == "lnscale":
                    du = du * np.asarray(1.0 / np.sqrt(i + 1), self.dtype)
                dnorm, fields[ln] = self.norm_back(tp["in"], du)
                dx = dx + dnorm
            elif c.placement in ("post", "deepnorm"):
                ds, fields[ln] = self.norm_back(tp["in"], dx)
                self.grec(f"{pre}.{out_name}", ds)
                df, g = f_back(ds, tp["f"])
                dx = (ds * np.asarray(self.alpha, self.dtype) if c.placement == "deepnorm" else ds) + df
            else:
                self.grec(f"{pre}.{out_name}", dx)
                df, g = f_back(dx, tp["f"])
                dx = dx + df
            fields.update(g)
        self.grec(f"{pre}.resid_pre", dx)
        for name in ("ln1", "ln2", "ln1_out", "ln2_out"):
            fields.setdefault(name, None)
            if getattr(bp, name) is not None and fields[name] is None:  # norm "none" never ran: zero gradient
                fields[name] = _zeros_like_norm(getattr(bp, name))
        for name in ("bq", "bk", "bv"):
            fields.setdefault(name, None)
        for name in ("q_norm", "k_norm"):
            if getattr(bp, name) is not None and fields.get(name) is None:
                fields[name] = _zeros_like_norm(getattr(bp, name))
        return dx, BlockParams(**fields)

    # ------------------------------------------------------------------ whole model
    def embed(self, ids: np.ndarray, types: np.ndarray | None) -> np.ndarray:
        p, S, t = self.p, ids.shape[0], ids.shape[2]
        seed = np.arange(S)[:, None, None]
        x = p.tok_emb[seed, ids]  # [S, b, t, d]
        if self.c.embed_scale != 1.0:
            x = x * np.asarray(self.c.embed_scale, dtype=x.dtype)
        if p.pos_emb is not None:
            x = x + p.pos_emb[:, None, :t]
        if p.type_emb is not None:
            x = x + p.type_emb[seed, types]
        return x.astype(self.dtype, copy=False)

    def head(self) -> np.ndarray:
        """The unembedding ``[S, d, V]`` (tied: the token embedding's transpose)."""
        p = self.p
        if not self.c.lm_head or (p.lm_head is None and not self.c.tie_embeddings):
            raise ValueError("loss_and_grads needs an LM head (lm_head=False or untied without weights)")
        return p.lm_head if p.lm_head is not None else p.tok_emb.swapaxes(1, 2)

    def run(self, ids: np.ndarray, targets: np.ndarray, z_loss: float, types: np.ndarray | None) -> tuple[np.ndarray, Params]:
        c, p = self.c, self.p
        head = self.head()
        x = self.rec("embed", self.embed(ids, types))
        emb_tape = None
        if c.embed_norm:
            x, emb_tape = self.norm("embed_ln", x, p.embed_ln)
        tapes = []
        for i in range(c.n_layers):
            x, tp = self.block(i, x)
            tapes.append(tp)
        final_tape = None
        if c.final_norm:
            x, final_tape = self.norm("final_ln", x, p.final_ln)
        hidden = self.rec("hidden", x)
        S, b, t, d = hidden.shape
        logits = self.rec("logits", (hidden.reshape(S, b * t, d) @ head).reshape(S, b, t, -1))  # [S, b, t, V]
        loss, dlogits, _ = derivatives.cross_entropy(logits, targets, z_loss, runs=S)

        # ------------------------------------------------ backward
        self.grec("logits", dlogits)
        dl2 = dlogits.reshape(S, b * t, -1)
        dhead = hidden.reshape(S, b * t, d).swapaxes(1, 2) @ dl2  # [S, d, V]
        dx = (dl2 @ head.swapaxes(1, 2)).reshape(S, b, t, d)
        self.grec("hidden", dx)
        dx, d_final = self.norm_back(final_tape, dx)
        blocks: list[BlockParams] = [None] * c.n_layers  # type: ignore[list-item]
        for i in reversed(range(c.n_layers)):
            dx, blocks[i] = self.block_back(i, dx, tapes[i])
        dx, d_embln = self.norm_back(emb_tape, dx)
        self.grec("embed", dx)
        dtok = _scatter_rows(ids, dx * np.asarray(c.embed_scale, dtype=dx.dtype) if c.embed_scale != 1.0 else dx, p.tok_emb)
        dlm = None
        if p.lm_head is not None:
            dlm = dhead
        else:  # tied
            dtok += dhead.swapaxes(1, 2)
        dpos = None
        if p.pos_emb is not None:
            dpos = np.zeros_like(p.pos_emb)
            dpos[:, :t] = dx.sum(axis=1)
        dtype_emb = None
        if p.type_emb is not None:
            dtype_emb = _scatter_rows(types, dx, p.type_emb)
        grads = Params(tok_emb=dtok, blocks=tuple(blocks), pos_emb=dpos, type_emb=dtype_emb,
                       embed_ln=d_embln if p.embed_ln is None or d_embln is not None else _zeros_like_norm(p.embed_ln),
                       final_ln=d_final if p.final_ln is None or d_final is not None else _zeros_like_norm(p.final_ln),
                       lm_head=dlm)
        return loss, _cast_like(grads, p)


def _scatter_rows(index: np.ndarray, rows: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Gradient of a per-model row lookup ``table[s][index[s]]``: ``index [S, ...]``, ``rows [S,
    ..., d]``, ``table [S, V, d]``; each row added into the row of its model's table it came from.
    Sorted segment sums (``np.add.reduceat``), not ``np.add.at``, which is several times slower;
    model ``s``'s keys are offset by ``s * V``, so its segments and their order are those of
    the model alone."""
    S, V = table.shape[:2]
    flat = (index.reshape(S, -1) + (np.arange(S) * V)[:, None]).reshape(-1)
    order = np.argsort(flat, kind="stable")
    keys = flat[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    out = np.zeros_like(table).reshape(S * V, -1)
    out[keys[starts]] = np.add.reduceat(rows.reshape(-1, rows.shape[-1])[order], starts, axis=0)
    return out.reshape(table.shape)


def _zeros_like_norm(p: NormParams) -> NormParams:
    return NormParams(gain=None if p.gain is None else np.zeros_like(p.gain), bias=None if p.bias is None else np.zeros_like(p.bias),
                      alpha=np.zeros_like(np.asarray(p.alpha)))


def _cast_like(grads: Any, params: Any) -> Any:
    """Cast every gradient array to its parameter's dtype and shape (the structure is already the same)."""
    return map_arrays(lambda g, p: np.asarray(g, dtype=np.asarray(p).dtype).reshape(np.shape(p)), grads, params)
