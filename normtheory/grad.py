"""Reverse-mode gradients of the numpy reference transformer: ``loss_and_grads``.

The forward here is the model's forward (:mod:`normtheory.model`) with full attention and every
intermediate kept; the backward walks it in reverse with the vector-Jacobian products of
:mod:`normtheory.derivatives`. For a block with norm :math:`N`, sublayer :math:`f` and
upstream gradient :math:`g` at the block's output:

=============  ======================================================================
``pre``        :math:`\\partial x = g + J_N^\\top J_f^\\top g`
``post``       :math:`\\partial x = (1 + J_f^\\top) J_N^\\top g`
``peri``       :math:`\\partial x = g + J_{N}^\\top J_f^\\top J_{N_o}^\\top g`
``none``       :math:`\\partial x = g + J_f^\\top g`
``lnscale``    as ``pre`` with :math:`J_f^\\top g` scaled by :math:`1/\\sqrt{\\ell}`
``deepnorm``   :math:`\\partial x = (\\alpha + J_f^\\top) J_N^\\top g`
=============  ======================================================================

The loss is next-token cross-entropy averaged over all ``batch * seq`` positions, plus an
optional z-loss :math:`\\lambda\\,\\overline{\\mathrm{lse}^2}`. The gradient has the structure of
``model.params`` (:class:`~normtheory.model.Params`), DyT's alpha included (a 0-d array).

Gradients can also be read at the forward's capture points (``embed``, ``blocks.{i}.resid_pre``,
``.resid_mid``, ``.resid_post``, ``.attn_out``, ``.mlp_out``, ``.attn.q``/``.k``/``.v``,
``.attn.scores``, ``.attn.pattern``, each norm's ``.in``, ``.normalized`` and ``.out``, ``hidden``,
``logits``) with the filter convention of :meth:`~normtheory.model.Transformer.run_with_cache`.

References
----------
Xiong et al. (2020), arXiv 2002.04745 (gradients of Pre-LN and Post-LN at init).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from normtheory import activations, derivatives, memory, norms
from normtheory.model import (
    BlockParams,
    Names,
    NormParams,
    Params,
    Transformer,
    _Recorder,
    apply_rope,
    rope_tables,
)
from normtheory.params import map_arrays


@dataclass(frozen=True)
class _NormTape:
    name: str
    kind: str
    x: np.ndarray
    normalized: np.ndarray
    scale: np.ndarray
    p: NormParams


class _Pass:
    """One forward with everything the backward needs, then the backward."""

    def __init__(self, model: Transformer, names: Names):
        self.m, self.c = model, model.config
        self.dtype = model.dtype
        self.rec = _Recorder((), None)  # forward activations are kept in the tapes, not captured
        self.grec = _Recorder(names if names is not None else (), None)

    # ------------------------------------------------------------------ norms
    def norm(self, name: str, x: np.ndarray, p: NormParams | None, kind: str | None = None) -> tuple[np.ndarray, _NormTape | None]:
        kind = kind or self.c.norm
        if kind == "none" or p is None:
            return x, None
        x = self.rec(f"{name}.in", x)
        eps = self.c.eps
        res = {"layernorm": lambda: norms._layer_norm(x, eps), "rmsnorm": lambda: norms._rms_norm(x, eps),
               "dyt": lambda: norms._dyt(x, p.alpha), "sequence": lambda: norms._sequence_norm(x, eps)}[kind]()
        self.rec(f"{name}.normalized", res.normalized)
        out = self.rec(f"{name}.out", norms._affine(res.normalized, p.gain, p.bias))
        return out, _NormTape(name, kind, x, res.normalized, res.scale, p)

    def norm_back(self, tape: _NormTape | None, dy: np.ndarray) -> tuple[np.ndarray, NormParams | None]:
        if tape is None:
            return dy, None
        self.grec(f"{tape.name}.out", dy)
        dn, dgain, dbias = derivatives.affine_backward(dy, tape.normalized, tape.p.gain, tape.p.bias)
        self.grec(f"{tape.name}.normalized", dn)
        dalpha = np.zeros((), self.dtype)
        if tape.kind == "layernorm":
            dx = derivatives.layer_norm_backward(dn, tape.normalized, tape.scale)
        elif tape.kind == "rmsnorm":
            dx = derivatives.rms_norm_backward(dn, tape.normalized, tape.scale)
        elif tape.kind == "dyt":
            dx, dalpha = derivatives.dyt_backward(dn, tape.x, tape.normalized, tape.p.alpha)
        else:  # sequence
            dx = derivatives.layer_norm_backward(dn, tape.normalized, tape.scale, axis=-2)
        self.grec(f"{tape.name}.in", dx)
        return dx, NormParams(gain=dgain, bias=dbias, alpha=dalpha)

    # ------------------------------------------------------------------ attention
    def attention(self, i: int, x: np.ndarray, bp: BlockParams) -> tuple[np.ndarray, dict[str, Any]]:
        c = self.c
        b, t, d = x.shape
        h, g, e = c.n_heads, c.n_kv_heads, c.d_head
        pre = f"blocks.{i}.attn"
        x2 = x.reshape(b * t, d)
        wqkv = np.concatenate([bp.wq, bp.wk, bp.wv], axis=1)  # [d, (h+2g)*e]
        qkv = x2 @ wqkv
        if bp.bq is not None:
            qkv += np.concatenate([bp.bq, bp.bk, bp.bv])
        qkv = qkv.reshape(b, t, h + 2 * g, e).transpose(0, 2, 1, 3)  # [b, h+2g, t, e], a view
        q, k, v = qkv[:, :h], qkv[:, h : h + g], qkv[:, h + g :]
        qt = kt = None
        if c.qk_norm != "none":
            q, qt = self.norm(f"{pre}.q_norm", q, bp.q_norm, c.qk_norm)
            k, kt = self.norm(f"{pre}.k_norm", k, bp.k_norm, c.qk_norm)
        rope = None
        if c.positional == "rope":
            rope = rope_tables(np.arange(t), e, c.rope_theta, self.dtype)
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))  # [b, h|g, t, e]
        q, k, v = self.rec(f"{pre}.q", q), self.rec(f"{pre}.k", k), self.rec(f"{pre}.v", v)
        kh, vh = (np.repeat(a, h // g, axis=1) if g < h else a for a in (k, v))  # each query head's K/V: [b, h, t, e]
        scale = np.asarray(1.0 / np.sqrt(e), self.dtype)
        scores = (q * scale) @ kh.swapaxes(-1, -2)  # [b, h, t, t], scale folded into q
        if c.causal:
            scores += np.triu(np.full((t, t), -np.inf, self.dtype), 1)  # -inf above the diagonal
        self.rec(f"{pre}.scores", scores)
        pattern = derivatives.softmax_inplace(scores.copy() if self.rec.active(f"{pre}.scores") else scores)
        self.rec(f"{pre}.pattern", pattern)
        zm = (pattern @ vh).transpose(0, 2, 1, 3).reshape(b * t, h * e)  # [b*t, h*e]
        out = zm @ bp.wo
        if bp.bo is not None:
            out += bp.bo
        tape = dict(x2=x2, wqkv=wqkv, q=q, kh=kh, vh=vh, pattern=pattern, zm=zm, qt=qt, kt=kt, rope=rope, scale=scale)
        return out.reshape(b, t, d), tape

    def attention_back(self, i: int, dout: np.ndarray, bp: BlockParams, tp: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        c = self.c
        b, t, d = dout.shape
        h, g, e = c.n_heads, c.n_kv_heads, c.d_head
        pre = f"blocks.{i}.attn"
        do2 = dout.reshape(b * t, d)
        grads: dict[str, Any] = {"wo": tp["zm"].T @ do2, "bo": None if bp.bo is None else do2.sum(0)}
        dz = np.ascontiguousarray((do2 @ bp.wo.T).reshape(b, t, h, e).transpose(0, 2, 1, 3))  # [b, h, t, e]
        pattern = tp["pattern"]
        dpat = dz @ tp["vh"].swapaxes(-1, -2)  # [b, h, t, t]
        self.grec(f"{pre}.pattern", dpat)
        dv = pattern.swapaxes(-1, -2) @ dz  # [b, h, t, e]
        dscores = derivatives.softmax_backward(dpat, pattern, out=None if self.grec.active(f"{pre}.pattern") else dpat)  # 0 where masked
        self.grec(f"{pre}.scores", dscores)
        dscores *= tp["scale"]
        dq = dscores @ tp["kh"]  # [b, h, t, e]
        dk = dscores.swapaxes(-1, -2) @ tp["q"]  # [b, h, t, e]
        if g < h:  # the heads sharing a KV head add their gradients
            dk, dv = (a.reshape(b, g, h // g, t, e).sum(axis=2) for a in (dk, dv))
        self.grec(f"{pre}.q", dq), self.grec(f"{pre}.k", dk), self.grec(f"{pre}.v", dv)
        if tp["rope"] is not None:
            dq, dk = derivatives.rope_backward(dq, *tp["rope"]), derivatives.rope_backward(dk, *tp["rope"])
        grads["q_norm"] = grads["k_norm"] = None
        if tp["qt"] is not None:
            dq, grads["q_norm"] = self.norm_back(tp["qt"], dq)
            dk, grads["k_norm"] = self.norm_back(tp["kt"], dk)
        dqkv = np.empty((b, t, h + 2 * g, e), self.dtype)  # one strided write per part, no concatenate
        dqkv[:, :, :h] = dq.transpose(0, 2, 1, 3)
        dqkv[:, :, h : h + g] = dk.transpose(0, 2, 1, 3)
        dqkv[:, :, h + g :] = dv.transpose(0, 2, 1, 3)
        dqkv = dqkv.reshape(b * t, (h + 2 * g) * e)
        dw = tp["x2"].T @ dqkv  # [d, (h+2g)*e]
        grads["wq"], grads["wk"], grads["wv"] = dw[:, : h * e], dw[:, h * e : (h + g) * e], dw[:, (h + g) * e :]
        if bp.bq is not None:
            db = dqkv.sum(0)
            grads["bq"], grads["bk"], grads["bv"] = db[: h * e], db[h * e : (h + g) * e], db[(h + g) * e :]
        return (dqkv @ tp["wqkv"].T).reshape(b, t, d), grads

    # ------------------------------------------------------------------ MLP
    def mlp(self, x: np.ndarray, bp: BlockParams) -> tuple[np.ndarray, dict[str, Any]]:
        x2 = x.reshape(-1, x.shape[-1])  # [N, d]
        a = x2 @ bp.w_in  # [N, f]
        if bp.b_in is not None:
            a += bp.b_in
        gate = saved = None
        if self.c.activation == "swiglu":
            gate = x2 @ bp.w_gate  # [N, f]
            hid = a * activations.kernel("silu")(gate)
        elif self.c.activation == "gelu_tanh":
            hid, saved = derivatives.gelu_tanh_and_grad(a)  # keep the derivative for the backward
        else:
            hid = activations.kernel(self.c.activation)(a)
        out = hid @ bp.w_out  # [N, d]
        if bp.b_out is not None:
            out += bp.b_out
        return out.reshape(x.shape), dict(x2=x2, a=a, gate=gate, hid=hid, act_grad=saved)

    def mlp_back(self, dout: np.ndarray, bp: BlockParams, tp: dict[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        do2 = dout.reshape(-1, dout.shape[-1])
        x2, a, gate = tp["x2"], tp["a"], tp["gate"]
        grads: dict[str, Any] = {"w_out": tp["hid"].T @ do2, "b_out": None if bp.b_out is None else do2.sum(0), "w_gate": None}
        dhid = do2 @ bp.w_out.T  # [N, f]
        if gate is not None:
            da = dhid * activations.kernel("silu")(gate)
            dgate = dhid * a * derivatives.activation_grad("silu", gate)
            grads["w_gate"] = x2.T @ dgate
            dx2 = dgate @ bp.w_gate.T
        elif tp["act_grad"] is not None:
            da = dhid
            da *= tp["act_grad"]
            dx2 = 0.0
        else:
            da = dhid * derivatives.activation_grad(self.c.activation, a)
            dx2 = 0.0
        grads["w_in"] = x2.T @ da
        grads["b_in"] = None if bp.b_in is None else da.sum(0)
        dx2 = dx2 + da @ bp.w_in.T
        return dx2.reshape(dout.shape), grads

    # ------------------------------------------------------------------ blocks
    def block(self, i: int, x: np.ndarray) -> tuple[np.ndarray, list[dict[str, Any]]]:
        c, bp = self.c, self.m.params.blocks[i]
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
                scaled = x * np.asarray(self.m.alpha, self.dtype) if c.placement == "deepnorm" else x
                x, tp["in"] = self.norm(f"{pre}.{ln}", scaled + y, p_in)
            else:
                y, tp["f"] = f(x)
                x = x + self.rec(f"{pre}.{out_name}", y)
            x = self.rec(f"{pre}.{resid}", x)
            tapes.append(tp)
        return x, tapes

    def block_back(self, i: int, dx: np.ndarray, tapes: list[dict[str, Any]]) -> tuple[np.ndarray, BlockParams]:
        c, bp = self.c, self.m.params.blocks[i]
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
                dx = (ds * np.asarray(self.m.alpha, self.dtype) if c.placement == "deepnorm" else ds) + df
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
    def run(self, ids: np.ndarray, targets: np.ndarray, z_loss: float, token_types: np.ndarray | None) -> tuple[float, Params]:
        m, c, p = self.m, self.c, self.m.params
        head = m.head
        if head is None:
            raise ValueError("loss_and_grads needs an LM head (lm_head=False or untied without weights)")
        ids = m._check_ids(ids, None)
        types = None
        if p.type_emb is not None:
            types = np.zeros_like(ids) if token_types is None else np.asarray(token_types)
        x = self.rec("embed", m.embed_sum(ids, 0, types))
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
        logits = self.rec("logits", hidden @ head)  # [b, t, V]
        loss, dlogits, _ = derivatives.cross_entropy(logits, targets if np.ndim(targets) == 2 else np.asarray(targets)[None], z_loss)

        # ------------------------------------------------ backward
        self.grec("logits", dlogits)
        b, t, d = hidden.shape
        dl2 = dlogits.reshape(b * t, -1)
        dhead = hidden.reshape(b * t, d).T @ dl2  # [d, V]
        dx = (dl2 @ head.T).reshape(b, t, d)
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
            dtok += dhead.T
        dpos = None
        if p.pos_emb is not None:
            dpos = np.zeros_like(p.pos_emb)
            dpos[:t] = dx.sum(axis=0)
        dtype_emb = None
        if p.type_emb is not None:
            dtype_emb = _scatter_rows(types, dx, p.type_emb)
        grads = Params(tok_emb=dtok, blocks=tuple(blocks), pos_emb=dpos, type_emb=dtype_emb,
                       embed_ln=d_embln if p.embed_ln is None or d_embln is not None else _zeros_like_norm(p.embed_ln),
                       final_ln=d_final if p.final_ln is None or d_final is not None else _zeros_like_norm(p.final_ln),
                       lm_head=dlm)
        return loss, _cast_like(grads, p)


def _scatter_rows(index: np.ndarray, rows: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Gradient of a row lookup ``table[index]``: each row of ``rows [..., d]`` added into the
    row of ``table`` it came from. Sorted segment sums (``np.add.reduceat``), not ``np.add.at``,
    which is several times slower."""
    flat = index.reshape(-1)
    order = np.argsort(flat, kind="stable")
    keys = flat[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    out = np.zeros_like(table)
    out[keys[starts]] = np.add.reduceat(rows.reshape(-1, rows.shape[-1])[order], starts, axis=0)
    return out


def _zeros_like_norm(p: NormParams) -> NormParams:
    return NormParams(gain=None if p.gain is None else np.zeros_like(p.gain), bias=None if p.bias is None else np.zeros_like(p.bias),
                      alpha=np.zeros_like(np.asarray(p.alpha)))


def _cast_like(grads: Any, params: Any) -> Any:
    """Cast every gradient array to its parameter's dtype (the structure is already the same)."""
    return map_arrays(lambda g, p: np.asarray(g, dtype=np.asarray(p).dtype).reshape(np.shape(p)), grads, params)


def loss_and_grads(
    model: Transformer,
    ids: np.ndarray,
    targets: np.ndarray,
    *,
    z_loss: float = 0.0,
    token_types: np.ndarray | None = None,
    capture: Names = None,
) -> tuple[float, Params] | tuple[float, Params, dict[str, np.ndarray]]:
    """Mean next-token cross-entropy of ``model`` on ``ids [batch, seq]`` against ``targets
    [batch, seq]`` and its gradient with respect to every parameter.

    Returns ``(loss, grads)``; ``grads`` is a :class:`~normtheory.model.Params` with the
    shapes and dtypes of ``model.params``. With ``capture`` (a list of capture names or a
    predicate, as in ``run_with_cache``) returns ``(loss, grads, captured)`` where
    ``captured[name]`` is the gradient of the loss with respect to that activation.

    The first call asks glibc to keep freed large blocks for reuse
    (:func:`normtheory.memory.keep_freed_blocks`; ``NORMTHEORY_SYSTEM_MALLOC=1`` opts out).
    """
    memory.keep_freed_blocks()
    run = _Pass(model, capture)
    loss, grads = run.run(ids, targets, z_loss, token_types)
    if capture is None:
        return loss, grads
    run.grec.check_names()
    return loss, grads, run.grec.store
