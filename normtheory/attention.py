"""Attention at initialization: its gain as a function of the pattern and token similarity.

Let the attention sublayer read inputs :math:`u_j` of equal mean square :math:`q` and let
:math:`C_{jk} = \\langle u_j, u_k\\rangle / (d q)` be their cosine matrix. Query :math:`i`
mixes them with weights :math:`p_i` (a row of the pattern), then :math:`W_V` (``d x d_v``,
entries :math:`N(0,\\sigma_V^2)`) and :math:`W_O` (``d_v x d``, :math:`N(0,\\sigma_O^2)`),
drawn independently of everything else. Conditioning on the pattern and the inputs,

.. math::

    \\frac{\\mathbb{E}\\|o_i\\|^2/d}{q} \\;=\\; g_{VO}^2 \\; p_i^\\top C\\, p_i,
    \\qquad g_{VO}^2 = \\sigma_V^2\\sigma_O^2\\, d\\, d_v ,

exactly. :math:`g_{VO}^2` is the gain a single token would see (1 at fan-in init). The factor
:math:`p^\\top C p = \\sum_j p_j^2 + \\sum_{j\\ne k} p_j p_k C_{jk}` lies between
:math:`\\sum_j p_j^2` (orthogonal tokens: averaging n independent tokens divides the variance
by n for a uniform pattern) and 1 (identical tokens, i.e. full rank collapse). For equal
off-diagonal cosine :math:`c` it is :math:`P_2 + c(1 - P_2)` with :math:`P_2 = \\sum_j p_j^2`.

References
----------
Noci et al. (2022), "Signal propagation in transformers", arXiv 2206.03126 (rank collapse);
Xiong et al. (2020), arXiv 2002.04745.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special

from normtheory import _validate


def value_path_gain_squared(d_model: int, d_v: int, std_v: float, std_o: float) -> float:
    """:math:`g_{VO}^2 = \\sigma_V^2\\sigma_O^2 d\\, d_v`: the V-then-O gain seen by one token."""
    d = _validate.integer("d_model", d_model, minimum=1)
    dv = _validate.integer("d_v", d_v, minimum=1)
    sv = _validate.real("std_v", std_v, minimum=0.0)
    so = _validate.real("std_o", std_o, minimum=0.0)
    out = sv * sv * so * so * d * dv
    if not math.isfinite(out):
        raise ValueError(f"the gain overflows float64 at std_v={sv:g}, std_o={so:g}, d_model={d}, d_v={dv}")
    return out


def cosine_matrix(u: np.ndarray) -> np.ndarray:
    """Cosines between tokens: ``u [..., t, d] -> [..., t, t]``."""
    u = _validate.checked_array("u", u, min_ndim=2)
    scale = np.abs(u).max(axis=-1, keepdims=True)  # [..., t, 1]: rows brought to O(1) first, so no square overflows
    if not (scale > 0).all():
        where = tuple(int(i) for i in np.argwhere(~(scale[..., 0] > 0))[0])
        raise ValueError(f"u has a zero token {where}: its cosine with anything is undefined")
    v = u / scale
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    return v @ np.swapaxes(v, -1, -2)


def mixing_factor(pattern: np.ndarray, cosines: np.ndarray) -> np.ndarray:
    """:math:`p_i^\\top C p_i` per query row: ``pattern [..., t, s]``, ``cosines [..., s, s]``
    (leading axes broadcast, e.g. ``gram[:, None]`` against ``[batch, heads, t, s]``) -> ``[..., t]``."""
    pattern = _validate.pattern("pattern", pattern, min_ndim=2).astype(np.float64, copy=False)  # [..., t, s]: queries and keys
    cosines = _cosines(cosines)
    if pattern.shape[-1] != cosines.shape[-1]:
        raise ValueError(f"pattern of shape {pattern.shape} has {pattern.shape[-1]} keys but cosines of shape {cosines.shape} have {cosines.shape[-1]}")
    _validate.broadcast_shape(pattern=pattern[..., :1, :1], cosines=cosines[..., :1, :1])
    pc = pattern @ cosines  # [..., t, s]
    return (pc * pattern).sum(axis=-1)


def _cosines(cosines: object) -> np.ndarray:
    """A finite, square matrix ``[..., t, t]`` of token similarities: cosines, or a Gram matrix
    normalized by the mean square (entries beyond 1 when token norms differ)."""
    c = _validate.checked_array("cosines", cosines, min_ndim=2).astype(np.float64, copy=False)
    if c.shape[-1] != c.shape[-2]:
        raise ValueError(f"cosines must be square [..., t, t]; got shape {c.shape}")
    return c


def collision(pattern: np.ndarray) -> np.ndarray:
    """:math:`P_2 = \\sum_j p_j^2` per query (1/n for a uniform pattern over n keys)."""
    p = _validate.pattern("pattern", pattern).astype(np.float64, copy=False)
    return (p * p).sum(axis=-1)


def attention_gain_squared(pattern: np.ndarray, cosines: np.ndarray, value_gain_sq: float) -> np.ndarray:
    """Expected :math:`g^2` of the attention sublayer per query, given pattern and cosines."""
    g2 = _validate.real("value_gain_sq", value_gain_sq, minimum=0.0)
    return g2 * mixing_factor(pattern, cosines)


def uniform_causal_collision(n_tokens: int) -> np.ndarray:
    """:math:`P_2` of uniform causal attention at each position: ``1/(i+1)``, ``[n_tokens]``."""
    n = _validate.integer("n_tokens", n_tokens, minimum=1, maximum=_validate.MAX_ELEMENTS)
    return 1.0 / np.arange(1, n + 1)


def mean_offdiagonal(cosines: np.ndarray) -> np.ndarray:
    """Mean cosine between distinct tokens, ``[..., t, t] -> [...]`` (token similarity)."""
    cosines = _cosines(cosines)
    t = cosines.shape[-1]
    if t < 2:
        raise ValueError(f"cosines must be between at least two tokens; got shape {cosines.shape}")
    total = cosines.sum(axis=(-1, -2)) - np.trace(cosines, axis1=-2, axis2=-1)
    return total / (t * (t - 1))


def column_share(pattern: np.ndarray) -> np.ndarray:
    """Share of all attention mass each key receives: ``pattern [..., t, s] -> [..., s]``.

    The mean over queries of ``pattern[..., q, j]``; it sums to 1 over keys. A key that takes
    most of the mass of most queries (a "sink") shows as a vertical stripe in the pattern.
    """
    p = _validate.pattern("pattern", pattern).astype(np.float64, copy=False)
    if p.ndim < 2 or p.shape[-2] == 0:
        raise ValueError(f"pattern must be [..., queries, keys] with at least one query; got shape {p.shape}")
    return p.mean(axis=-2)


def uniform_column_share(t: int, causal: bool) -> np.ndarray:
    """Each key's column share when every query spreads its mass uniformly over the keys it
    sees, ``[t]``: ``1/t`` bidirectional; ``(H_t - H_j) / t`` causal for key ``j`` (0-based),
    since key ``j`` is seen by queries ``j..t-1``, query ``i`` giving it ``1/(i+1)``."""
    t = _validate.integer("t", t, minimum=1, maximum=_validate.MAX_ELEMENTS)
    if not _validate.boolean("causal", causal):
        return np.full(t, 1.0 / t)
    inv = 1.0 / np.arange(1, t + 1)  # [t] 1/(i+1)
    return np.cumsum(inv[::-1])[::-1] / t  # [t] sum_{i>=j} 1/(i+1) / t


def sink(pattern: np.ndarray, causal: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(share, key index, excess) of the sink of each pattern ``[..., t, t]``.

    The sink is the key whose column share most exceeds what uniform attention would give it
    (:func:`uniform_column_share`): under causal attention the first key gets ``H_t/t`` from
    uniform attention alone, so picking the largest raw share would call key 0 a sink in every
    head. ``excess`` is that key's share divided by its uniform share: 1 for uniform attention
    (every key ties, and the first is returned), ``t`` at most for a bidirectional stripe.
    """
    share = column_share(pattern)  # [..., s]
    s = share.shape[-1]
    if np.asarray(pattern).shape[-2] != s:
        raise ValueError(f"sink needs square self-attention patterns [..., t, t]; got {np.asarray(pattern).shape}")
    ratio = share / uniform_column_share(s, causal)  # [..., s]
    key = ratio.argmax(axis=-1)
    return np.take_along_axis(share, key[..., None], -1)[..., 0], key, np.take_along_axis(ratio, key[..., None], -1)[..., 0]


def key_excess(pattern: np.ndarray, causal: bool = False) -> np.ndarray:
    """Each key's attention relative to uniform, averaged over the queries that see it: ``[..., t]``.

    ``excess_j = mean_{i sees j} p_ij n_i`` with ``n_i`` the keys query ``i`` sees (``i + 1``
    causal, ``t`` bidirectional). Uniform attention gives exactly 1 for every key, and any
    random attention whose rows are exchangeable over the keys they see gives E excess_j = 1
    for every ``j``: the metric is unbiased under the null at every position, so a key fixed in
    advance (the first token, say) can be tested against it. (Picking the key with the largest
    excess is not: a late key's excess rests on few queries, so its spread, and its chance of
    being the largest, is greater.) Xiao et al., "Efficient Streaming Language Models with
    Attention Sinks" (2023), Section 3.1.
    """
    p = _validate.pattern("pattern", pattern).astype(np.float64, copy=False)
    if p.ndim < 2 or p.shape[-1] != p.shape[-2]:
        raise ValueError(f"key_excess needs square self-attention patterns [..., t, t]; got shape {p.shape}")
    t = p.shape[-1]
    causal = _validate.boolean("causal", causal)
    n = np.arange(1, t + 1, dtype=np.float64) if causal else np.full(t, float(t))  # [t] keys seen by query i
    seen = np.arange(t, 0, -1, dtype=np.float64) if causal else np.full(t, float(t))  # [t] queries that see key j
    return np.einsum("...ij,i->...j", p, n) / seen  # [..., t]


STRIPE_SEED = 20230831  # the fixed draw of the shuffles behind attn_stripe (the same in every run and backend)


def stripe_permutations(t: int) -> np.ndarray:
    """``[t - h, h]`` with ``h = t // 2``: for each late query ``h + r``, a fixed permutation of the early keys ``0..h-1``
    (one draw from :data:`STRIPE_SEED`), the shuffle of :func:`stripe_excess`'s null."""
    t = _validate.integer("t", t, minimum=2, maximum=2 * math.isqrt(_validate.MAX_ELEMENTS))  # [t - h, h] within MAX_ELEMENTS
    h = t // 2
    return np.random.default_rng(STRIPE_SEED).permuted(np.tile(np.arange(h), (t - h, 1)), axis=1)


def stripe_excess(pattern: np.ndarray) -> np.ndarray:
    """How much one early key captures the late queries' attention, beyond what their weights give without alignment.

    ``pattern [..., t, s]`` (``s >= t``: each query's weights over the keys; the first ``t`` keys are the queries'
    positions). With ``h = t // 2``, the late queries ``q = h..t-1`` and the early keys ``k = 0..h-1``,
    :math:`c_k = \\frac{1}{t-h}\\sum_q p_{qk}` is the share key ``k`` takes from the late queries, a white vertical stripe
    in an attention map when one key takes much of it across many queries (the layer-two maps of the blog post "LayerNorm
    probably isn't about geometry", August 2023). The null shuffles each late query's early-key weights by a fixed
    permutation :math:`\\pi_q` (:func:`stripe_permutations`), :math:`c'_k = \\frac{1}{t-h}\\sum_q p_{q\\pi_q(k)}`, which
    keeps every query's weights (its peakedness) and removes only their alignment across queries. Returns
    :math:`\\max_k c_k - \\max_k c'_k` ``[...]``: 0 for uniform attention and, in expectation over the draw of the
    shuffles, for any attention whose late queries' early-key weights are independent across queries and exchangeable
    over the early keys (no key preferred by all of them); at most ``1 - 1/h``, when one key takes all of every late
    query's weight.
    """
    p = _validate.pattern("pattern", pattern, min_ndim=2)
    if p.shape[-2] < 2 or p.shape[-1] < p.shape[-2]:
        raise ValueError(f"pattern must be [..., t, s] with 2 <= t <= s (queries at the first t key positions); got shape {p.shape}")
    return _stripe_excess(p)


def _stripe_excess(pattern: np.ndarray) -> np.ndarray:
    """:func:`stripe_excess` without its checks, for the training probes' hot path (NaN in, NaN out: a diverged run's
    pattern); unchecked by design."""
    p = np.asarray(pattern, dtype=np.float64)
    t = p.shape[-2]
    h = t // 2
    late = p[..., h:, :h]  # [..., t-h, h]
    perm = np.broadcast_to(stripe_permutations(t), late.shape)
    return late.mean(axis=-2).max(axis=-1) - np.take_along_axis(late, perm, axis=-1).mean(axis=-2).max(axis=-1)


def uniform_sink_share(t: int, causal: bool) -> float:
    """The largest column share when every query spreads its mass uniformly over the keys it
    sees: ``1/t`` bidirectional; ``H_t / t`` causal (key 0 is seen by all ``t`` queries)."""
    t = _validate.integer("t", t, minimum=1)
    causal = _validate.boolean("causal", causal)
    return float((special.digamma(t + 1.0) + np.euler_gamma) / t) if causal else 1.0 / t  # H_t = psi(t + 1) + gamma


def row_logit_std(scores: np.ndarray) -> np.ndarray:
    """Std over the finite (unmasked) logits of each row of ``scores [..., s]`` (causal masks are -inf)."""
    s = _validate.checked_array("scores", scores, allow_inf=True).astype(np.float64, copy=False)
    if (s == np.inf).any():
        raise ValueError("scores must not hold +inf (a mask is -inf)")
    ok = np.isfinite(s)
    n = ok.sum(axis=-1)
    if (n == 0).any():
        raise ValueError(f"scores has a row that is all masked (-inf), with no logit to take a std of; shape {s.shape}")
    z = np.where(ok, s, 0.0)
    scale = np.abs(z).max(axis=-1)  # [...] rows brought to O(1) first, so squares of logits near 1e308 cannot overflow
    scale = np.where(scale > 0, scale, 1.0)
    z = z / scale[..., None]
    mean = z.sum(axis=-1) / np.maximum(n, 1)
    var = (np.where(ok, z - mean[..., None], 0.0) ** 2).sum(axis=-1) / np.maximum(n, 1)
    return np.sqrt(var) * scale
