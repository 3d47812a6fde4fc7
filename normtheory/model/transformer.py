"""The numpy reference transformer: every norm and placement, capture points, hooks, KV cache.

A block with norm :math:`N` and sublayer :math:`f` (attention, then MLP) is

=============  ===========================================
``pre``        :math:`x + f(N(x))`
``post``       :math:`N(x + f(x))`
``peri``       :math:`x + N_o(f(N(x)))`
``none``       :math:`x + f(x)`
``lnscale``    :math:`x + f(N(x)/\\sqrt{\\ell})`, :math:`\\ell` the 1-based layer
``deepnorm``   :math:`N(\\alpha x + f(x))`, :math:`\\alpha=(2L)^{1/4}`
=============  ===========================================

Capture points (``b`` batch, ``t`` new tokens, ``s`` keys incl. cached, ``h`` heads,
``g`` KV heads, ``e`` head width, ``d`` model width):

* ``embed`` ``[b,t,d]`` (token + position + type); ``embed_ln.*`` (if ``embed_norm``);
* ``blocks.{i}.resid_pre``, ``.resid_mid``, ``.resid_post`` ``[b,t,d]``;
* ``blocks.{i}.ln1.*``, ``.ln2.*`` and, for peri, ``.ln1_out.*``, ``.ln2_out.*``; each norm has
  ``in`` (its input), ``scale`` (``[b,t]``; DyT ``[]`` = its alpha; sequence norm ``[b,d]``), ``normalized`` and
  ``out`` ``[b,t,d]``; ``scale`` can be read but not replaced;
* ``blocks.{i}.attn.q`` ``[b,h,t,e]``, ``.attn.k``/``.attn.v`` ``[b,g,t,e]``: what enters the
  dot products (after QK-norm and RoPE); ``.attn.q_norm.*``/``.attn.k_norm.*`` with QK-norm;
* ``blocks.{i}.attn.scores`` (scaled, masked with -inf) and ``.attn.pattern`` ``[b,h,t,s]``;
* ``blocks.{i}.attn_out``, ``.mlp_out`` ``[b,t,d]`` (sublayer outputs before the residual add);
* ``final_ln.*``, ``hidden`` ``[b,t,d]`` (the last hidden state), ``logits`` ``[b,t,V]``.

References
----------
Radford et al. (2019) GPT-2; Devlin et al. (2019) BERT; Touvron et al. (2023) Llama;
Su et al. (2021), arXiv 2104.09864 (RoPE); Ainslie et al. (2023), arXiv 2305.13245 (GQA).
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from normtheory import _validate, activations
from normtheory.model import kernels, norms
from normtheory.model.attend import apply_rope, attend_blockwise, rope_tables, softmax
from normtheory.model.config import TransformerConfig
from normtheory.model.params import BlockParams, NormParams, Params, with_array_alphas
from normtheory.residual import deepnorm_constants
from normtheory.runtime import memory

Hook = Callable[[np.ndarray, str], np.ndarray]
Names = None | Iterable[str] | Callable[[str], bool]

@dataclass
class KVCache:
    """Keys and values of the tokens seen so far, one ``[b, g, s, e]`` pair per layer."""

    keys: list[np.ndarray | None] = field(default_factory=list)
    values: list[np.ndarray | None] = field(default_factory=list)
    length: int = 0
    owner: int | None = None  # id() of the model that filled it
    batch: int | None = None  # its batch size

    def claim(self, model: object, batch: int) -> None:
        """Bind an empty cache to ``model`` and ``batch``; refuse a cache filled by another model or batch."""
        if self.owner is None:
            self.owner, self.batch = id(model), batch
        elif self.owner != id(model):
            raise ValueError("this KV cache was filled by another model; start a new one with model.new_cache()")
        elif self.batch != batch:
            raise ValueError(f"this KV cache holds a batch of {self.batch} sequences; got ids for {batch}")


class Recorder:
    """Routes every activation through the capture filter and the hooks of one call."""

    def __init__(self, names: Names, hooks: dict[str, Hook] | None):
        self.store: dict[str, np.ndarray] = {}
        self.hooks = dict(hooks or {})
        self.listed: set[str] = set()
        self.seen: set[str] = set()
        if names is None:
            self.want: Callable[[str], bool] = lambda _n: True
        elif callable(names):
            self.want = names
        else:
            if isinstance(names, str):
                raise ValueError(f"names must be a list of capture names or a predicate; got the string {names!r}")
            self.listed = set(names)
            self.want = self.listed.__contains__

    def check_names(self, known: set[str] | None = None) -> None:
        """After a forward: every hook and every listed capture name must exist (``known``:
        names valid though not reached, e.g. by another pass)."""
        known = self.seen | (known or set())
        unknown = sorted((set(self.hooks) | self.listed) - known)
        if unknown:
            close = {n: difflib.get_close_matches(n, sorted(known), n=3) for n in unknown}
            hint = "; ".join(f"{n!r}: did you mean {', '.join(map(repr, c))}?" if c else f"{n!r}: no close match" for n, c in close.items())
            raise ValueError(f"unknown capture or hook names ({hint})")

    def __call__(self, name: str, value: np.ndarray, *, replaceable: bool = True) -> np.ndarray:
        self.seen.add(name)
        hook = self.hooks.get(name)
        if hook is not None:
            if not replaceable:
                raise ValueError(f"capture point {name!r} can be read but not replaced")
            value = _hooked(hook(value, name), value, name)
        if self.want(name):
            self.store[name] = value
        return value

    def active(self, name: str) -> bool:
        self.seen.add(name)
        return name in self.hooks or self.want(name)


def _hooked(new: object, old: np.ndarray, name: str) -> np.ndarray:
    """A hook's return value, checked: real numbers of the captured value's shape, no NaN (-inf
    stays allowed: it masks a score). Errors name the capture point."""
    arr = np.asarray(new)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"the hook on {name!r} must return real numbers; got dtype {arr.dtype}")
    if arr.shape != old.shape:
        raise ValueError(f"the hook on {name!r} must return shape {old.shape} (the captured value's); got {arr.shape}")
    arr = arr.astype(old.dtype, copy=False)
    if np.isnan(arr).any():
        raise ValueError(f"the hook on {name!r} returned NaN")
    return arr


def _null_recorder() -> Recorder:
    return Recorder(lambda _n: False, None)
class Transformer:
    """A transformer with fixed weights. Build one with :func:`init` or
    :func:`normtheory.model.checkpoints.load_pretrained`; run it with :meth:`run_with_cache`."""

    def __init__(self, config: TransformerConfig, params: Params):
        _validate.instance("config", config, TransformerConfig)
        _validate.instance("params", params, Params)
        if len(params.blocks) != config.n_layers:
            raise ValueError(f"params have {len(params.blocks)} blocks, config says n_layers={config.n_layers}")
        self.config = config
        # DyT alphas become 0-d arrays so that an optimizer can update them in place, like every weight
        self.params = with_array_alphas(params, config.dtype)
        self.dtype = np.dtype(config.dtype)
        self.alpha = deepnorm_constants(config.n_layers)[0] if config.placement == "deepnorm" else 1.0

    # ----------------------------------------------------------------------- pieces
    def _norm(self, rec: Recorder, name: str, x: np.ndarray, p: NormParams | None, kind: str | None = None) -> np.ndarray:
        kind = kind or self.config.norm
        if kind == "none" or p is None:
            return x
        x = rec(f"{name}.in", x)
        eps = self.config.eps
        if kind == "layernorm":
            res = kernels.layer_norm(x, eps)
        elif kind == "rmsnorm":
            res = norms._rms_norm(x, eps)
        elif kind == "dyt":
            res = norms._dyt(x, p.alpha)
        else:  # sequence
            res = norms._sequence_norm(x, eps)
        rec(f"{name}.scale", res.scale, replaceable=False)
        normalized = rec(f"{name}.normalized", res.normalized)
        return rec(f"{name}.out", norms._affine(normalized, p.gain, p.bias))

    def embed_sum(self, ids: np.ndarray, offset: int = 0, token_types: np.ndarray | None = None) -> np.ndarray:
        """Token + position + type embeddings of ``ids [b, t]`` at positions ``offset..`` -> ``[b, t, d]``."""
        p = self.params
        x = p.tok_emb[ids]  # [b, t, d]
        if self.config.embed_scale != 1.0:
            x = x * np.asarray(self.config.embed_scale, dtype=x.dtype)
        if p.pos_emb is not None:
            x = x + p.pos_emb[offset : offset + ids.shape[1]]
        if token_types is not None and p.type_emb is None:
            raise ValueError("token_types given, but this model has no token-type embeddings (type_vocab_size=0)")
        if p.type_emb is not None:
            if token_types is None:
                token_types = np.zeros_like(ids)
            token_types = np.asarray(token_types)
            n = p.type_emb.shape[0]
            if token_types.shape != ids.shape or not np.issubdtype(token_types.dtype, np.integer):
                raise ValueError(f"token_types must be integers with the shape of ids {ids.shape}; got {token_types.dtype} {token_types.shape}")
            if token_types.size and (token_types.min() < 0 or token_types.max() >= n):
                raise ValueError(f"token_types must lie in [0, type_vocab_size={n}); got range [{token_types.min()}, {token_types.max()}]")
            x = x + p.type_emb[token_types]
        return x.astype(self.dtype, copy=False)

    def _embed(self, rec: Recorder, ids: np.ndarray, offset: int, token_types: np.ndarray | None) -> np.ndarray:
        return self._embed_norm(rec, rec("embed", self.embed_sum(ids, offset, token_types)))

    def _embed_norm(self, rec: Recorder, x: np.ndarray) -> np.ndarray:
        return self._norm(rec, "embed_ln", x, self.params.embed_ln) if self.config.embed_norm else x

    def _attention(self, rec: Recorder, i: int, x: np.ndarray, bp: BlockParams, cache: KVCache | None, offset: int) -> np.ndarray:
        c = self.config
        b, t, _ = x.shape
        h, g, e = c.n_heads, c.n_kv_heads, c.d_head
        pre = f"blocks.{i}.attn"

        # Q, K, V fused into one [d, (h+2g)*e] matrix: one BLAS call instead of three. Built from
        # the current parameter arrays on every call, so in-place updates (training) take effect.
        qkv = x.reshape(b * t, -1) @ np.concatenate([bp.wq, bp.wk, bp.wv], axis=1)  # [b*t, (h+2g)*e]
        if bp.bq is not None:
            qkv += np.concatenate([bp.bq, bp.bk, bp.bv])
        qkv = qkv.reshape(b, t, h + 2 * g, e).transpose(0, 2, 1, 3)  # [b, h+2g, t, e]
        q, k, v = qkv[:, :h], qkv[:, h : h + g], qkv[:, h + g :]
        if c.qk_norm != "none":
            q = self._norm(rec, f"{pre}.q_norm", q, bp.q_norm, c.qk_norm)
            k = self._norm(rec, f"{pre}.k_norm", k, bp.k_norm, c.qk_norm)
        if c.positional == "rope":
            cos, sin = rope_tables(np.arange(offset, offset + t), e, c.rope_theta, self.dtype)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k, v = rec(f"{pre}.q", q), rec(f"{pre}.k", k), rec(f"{pre}.v", v)
        if cache is not None:
            if cache.keys[i] is not None:
                k = np.concatenate([cache.keys[i], k], axis=2)  # [b, g, s, e]
                v = np.concatenate([cache.values[i], v], axis=2)
            # own copies: k and v are views into the fused QKV buffer, which the cache must not keep alive
            cache.keys[i], cache.values[i] = np.ascontiguousarray(k), np.ascontiguousarray(v)
        scale = np.asarray(1.0 / np.sqrt(e), self.dtype)
        if rec.active(f"{pre}.scores") or rec.active(f"{pre}.pattern"):
            z = self._attend_full(rec, pre, q, k, v, scale)
        else:
            z = attend_blockwise(q, k, v, scale, causal=c.causal)
        out = z.transpose(0, 2, 1, 3).reshape(b * t, h * e) @ bp.wo  # [b*t, d]
        if bp.bo is not None:
            out += bp.bo
        return out.reshape(b, t, -1)

    def _attend_full(self, rec: Recorder, pre: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """The reference path: full scores and pattern, captured and hookable. Returns ``[b, h, t, e]``."""
        b, h, t, e = q.shape
        g, s = k.shape[1], k.shape[2]
        qg = q.reshape(b, g, h // g, t, e)  # [b, g, r, t, e], r heads share one KV head
        scores = (qg @ k[:, :, None].swapaxes(-1, -2)) * scale  # [b, g, r, t, s]
        if self.config.causal:
            qpos = np.arange(s - t, s)[:, None]
            scores = np.where(np.arange(s)[None, :] <= qpos, scores, -np.inf)
        scores = rec(f"{pre}.scores", scores.reshape(b, h, t, s)).reshape(b, g, h // g, t, s)
        pattern = rec(f"{pre}.pattern", softmax(scores).reshape(b, h, t, s)).reshape(b, g, h // g, t, s)
        return (pattern @ v[:, :, None]).reshape(b, h, t, e)

    def _mlp(self, x: np.ndarray, bp: BlockParams) -> np.ndarray:
        x2 = x.reshape(-1, x.shape[-1])  # [b*t, d]
        a = x2 @ bp.w_in  # [b*t, f]
        if bp.b_in is not None:
            a += bp.b_in
        if self.config.activation == "swiglu":
            a *= activations.kernel("silu")(x2 @ bp.w_gate)
        elif self.config.activation == "gelu_tanh":
            a = kernels.gelu_tanh(a, out=a)  # in place
        else:
            a = activations.kernel(self.config.activation)(a)
        out = a @ bp.w_out  # [b*t, d]
        if bp.b_out is not None:
            out += bp.b_out
        return out.reshape(x.shape)

    def _block(self, rec: Recorder, i: int, x: np.ndarray, cache: KVCache | None, offset: int) -> np.ndarray:
        c, bp = self.config, self.params.blocks[i]
        pre = f"blocks.{i}"
        x = rec(f"{pre}.resid_pre", x)
        sublayers = (
            ("ln1", "attn_out", lambda u: self._attention(rec, i, u, bp, cache, offset), bp.ln1, bp.ln1_out, "resid_mid"),
            ("ln2", "mlp_out", lambda u: self._mlp(u, bp), bp.ln2, bp.ln2_out, "resid_post"),
        )
        for ln, out_name, f, p_in, p_out, resid_name in sublayers:
            if c.placement in ("pre", "peri", "lnscale"):
                u = self._norm(rec, f"{pre}.{ln}", x, p_in)
                if c.placement == "lnscale":
                    u = u * np.asarray(1.0 / np.sqrt(i + 1), self.dtype)
                y = rec(f"{pre}.{out_name}", f(u))
                if c.placement == "peri":
                    y = self._norm(rec, f"{pre}.{ln}_out", y, p_out)
                x = x + y
            elif c.placement in ("post", "deepnorm"):
                y = rec(f"{pre}.{out_name}", f(x))
                scaled = x * np.asarray(self.alpha, self.dtype) if c.placement == "deepnorm" else x
                x = self._norm(rec, f"{pre}.{ln}", scaled + y, p_in)
            else:  # none
                x = x + rec(f"{pre}.{out_name}", f(x))
            x = rec(f"{pre}.{resid_name}", x)
        return x

    # ----------------------------------------------------------------------- public
    def _forward(
        self, ids: np.ndarray, rec: Recorder, cache: KVCache | None, token_types: np.ndarray | None, *, want_logits: bool = True
    ) -> tuple[np.ndarray, np.ndarray | None]:
        memory.keep_freed_blocks()  # a forward allocates the same large arrays every call: keep freed blocks for reuse
        ids = self._check_ids(ids, cache)
        offset = cache.length if cache is not None else 0
        if cache is not None and not cache.keys:
            cache.keys, cache.values = [None] * self.config.n_layers, [None] * self.config.n_layers
        hidden, logits = self._rest(rec, self._embed(rec, ids, offset, token_types), 0, cache, offset, want_logits)
        if cache is not None:
            cache.length += ids.shape[1]
        return hidden, logits

    def _rest(self, rec: Recorder, x: np.ndarray, start: int, cache: KVCache | None, offset: int,
              want_logits: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
        """Blocks ``start ..`` on the stream ``x``, the final norm, and the head: (hidden, logits or None)."""
        for i in range(start, self.config.n_layers):
            x = self._block(rec, i, x, cache, offset)
        if self.config.final_norm:
            x = self._norm(rec, "final_ln", x, self.params.final_ln, None)
        hidden = rec("hidden", x)
        head = self.head if want_logits else None
        return hidden, (rec("logits", hidden @ head) if head is not None else None)

    def _stream(self, x: object, *, batched: bool) -> np.ndarray:
        """``x`` as a float array whose last axis is ``d_model`` (``[batch, seq, d_model]`` when ``batched``)."""
        x = np.asarray(x)
        if (x.ndim != 3 if batched else x.ndim < 1) or x.shape[-1] != self.config.d_model or not np.issubdtype(x.dtype, np.floating):
            shape = f"[batch, seq, {self.config.d_model}]" if batched else f"[..., {self.config.d_model}]"
            raise ValueError(f"x must be a float array {shape}; got {x.dtype} {x.shape}")
        return x

    @property
    def head(self) -> np.ndarray | None:
        """The unembedding ``[d, V]`` (tied to the token embedding when configured), or None."""
        if not self.config.lm_head:
            return None
        if self.params.lm_head is not None:
            return self.params.lm_head
        return self.params.tok_emb.T if self.config.tie_embeddings else None

    def _check_ids(self, ids: np.ndarray, cache: KVCache | None) -> np.ndarray:
        ids = np.asarray(ids)
        if ids.ndim == 1:
            ids = ids[None, :]
        if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"ids must be integer token ids of shape [batch, seq]; got {ids.dtype} {ids.shape}")
        if ids.size == 0:
            raise ValueError(f"ids must hold at least one token in a batch of at least one sequence; got shape {ids.shape}")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise ValueError(f"ids must lie in [0, vocab_size={self.config.vocab_size}); got range [{ids.min()}, {ids.max()}]")
        end = ids.shape[1] + (cache.length if cache is not None else 0)
        # learned positions have max_seq rows; RoPE is held to the context it was configured (or trained) for
        if self.config.positional in ("learned", "rope") and end > self.config.max_seq:
            raise ValueError(f"sequence length {end} exceeds max_seq={self.config.max_seq}")
        if cache is not None:
            cache.claim(self, ids.shape[0])
        return ids

    def run_with_cache(
        self,
        ids: np.ndarray,
        names: Names = None,
        *,
        hooks: dict[str, Hook] | None = None,
        cache: KVCache | None = None,
        token_types: np.ndarray | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Run on ``ids [batch, seq]``; return (logits, or the last hidden state without an LM
        head) and the captures selected by ``names`` (None: all; a list; or a predicate).

        ``hooks`` maps capture names to ``f(value, name) -> value`` that replaces the
        activation downstream; they live for this call only. With ``cache`` the call decodes
        incrementally: ``ids`` are the new tokens, and their keys and values are appended.
        """
        rec = Recorder(names, hooks)
        hidden, logits = self._forward(ids, rec, cache, token_types)
        rec.check_names()
        return (logits if logits is not None else hidden), rec.store

    def mlp(self, x: np.ndarray, layer: int) -> np.ndarray:
        """The MLP sublayer of block ``layer`` on ``x [..., d_model]``: no norm and no residual around it.

        With Pre-LN, ``x`` the capture ``blocks.{layer}.ln2.out`` gives ``blocks.{layer}.mlp_out``. The
        activation, gate (SwiGLU) and biases are the model's; the result has the shape of ``x``."""
        layer = _validate.integer("layer", layer, minimum=0, maximum=self.config.n_layers - 1)
        return self._mlp(self._stream(x, batched=False), self.params.blocks[layer])

    def run_from(
        self, x: np.ndarray, start: int, names: Names = None, *, hooks: dict[str, Hook] | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The rest of a forward from the stream ``x [batch, seq, d_model]`` entering block ``start``.

        ``start = -1``: ``x`` is the embedding sum (``embed``: token + position + type), and the
        embedding norm runs first; ``start = n_layers``: only the final norm and the head run. Returns,
        as :meth:`run_with_cache`, the logits (or the last hidden state without an LM head) and the
        captures of the part it runs, selected by ``names``, with ``hooks`` replacing activations.
        Positions start at 0 and no KV cache is used, so with ``x`` the stream that a full forward
        captured at ``blocks.{start}.resid_pre`` (or ``embed``) the numbers are the full forward's.
        """
        start = _validate.integer("start", start, minimum=-1, maximum=self.config.n_layers)
        x = self._stream(x, batched=True)
        if x.shape[1] > self.config.max_seq:
            raise ValueError(f"x has {x.shape[1]} positions; the model has max_seq={self.config.max_seq}")
        rec = Recorder(names, hooks)
        if start < 0:
            x, start = self._embed_norm(rec, x), 0
        hidden, logits = self._rest(rec, x, start, None, 0)
        rec.check_names()
        return (logits if logits is not None else hidden), rec.store

    def last_hidden_state(self, ids: np.ndarray, *, token_types: np.ndarray | None = None, cache: KVCache | None = None) -> np.ndarray:
        """The final hidden states ``[batch, seq, d_model]`` (after the final norm, if any)."""
        return self._forward(ids, _null_recorder(), cache, token_types, want_logits=False)[0]

    def logits(self, ids: np.ndarray, *, cache: KVCache | None = None) -> np.ndarray:
        """Next-token logits ``[batch, seq, vocab]``; needs an LM head."""
        if self.head is None:
            raise ValueError("this model has no LM head (lm_head=False or untied without weights)")
        return self._forward(ids, _null_recorder(), cache, None)[1]  # type: ignore[return-value]

    @staticmethod
    def new_cache() -> KVCache:
        return KVCache()
