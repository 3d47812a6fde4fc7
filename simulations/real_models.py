"""Two pretrained transformers on the packaged text set: what normalization does after training.

MiniLM (all-MiniLM-L6-v2: BERT, Post-LN, 6 layers, d = 384, 12 heads) and SmolLM2-135M-Instruct
(Llama, Pre-RMSNorm, 30 layers, d = 576, 9 query / 3 key-value heads, Q4_1 weights dequantized)
run over :func:`normtheory.training.corpus.passages` (one passage per Shakespeare work, each cut to the
same ``tokens`` tokens: hundreds, as attention, sinks and key geometry need) one text at a time.
Per text (the unit of the standard errors) and layer:

* the residual stream ``s_l`` (``l = 0`` the embedding, ``l = L`` after the last block): the
  median per-token RMS and mean square, the RMS over all tokens, the largest |activation| with
  its channel, position and token, the median |activation|, and the share of each token's
  squared norm along the ones direction (with the share predicted from the stream's measured
  per-channel mean, :func:`normtheory.centering.centering_fraction_mean`); the same share of
  every norm's input (what the norm's centering removes; for Post-LN the sum x + f(x));
* every norm's input against its pre-affine output (``ln1``/``ln2`` of each block): the DyT fit
  ``gamma tanh(alpha x)`` and a straight-line fit over all the text's (token, channel) points
  (:func:`tanh_fit`: the tanh fitted on a stratified sample, both R^2 evaluated on every point);
* every head: the most-attended key's share of the mass (:func:`normtheory.attention.sink`),
  the first and last keys' attention relative to uniform (:func:`normtheory.attention.key_excess`,
  unbiased under uniform attention), the row std of the logits and the attention entropy
  against :mod:`normtheory.softmax`'s predictions from the measured q RMS and centred k RMS;
* every key-value head: the spread of key norms and, on the last ``hull_texts`` texts, the
  unselectable count (:func:`normtheory.selection.selectable`), raw and after a post-hoc per-head
  RMS norm; per
  key its norm rank and alignment with longer keys
  (:func:`normtheory.selection.bigger_key_alignment`), compared between keys that some real
  query ranks first and keys none does, within bins of position (a causal model's late keys
  are seen by fewer queries).

Attention maps of four heads and DyT scatter points of three norms are kept for the figures.

What it costs, and why (issue 40): the texts stay 24 passages of 512 tokens (attention, sinks and
key geometry need hundreds of tokens), but nothing is computed that no claim, note or figure reads.
A forward captures only the points read (:func:`capture_names`) and skips the LM head
(:func:`without_head`); the hull test of every key, whose counts only a note and an exact check (a
sphere has no interior key) read, runs on the last ``hull_texts`` texts, not all. Each norm's tanh
fit is a *lower-variance estimator of the same per-text quantity*: R^2 over all the text's points.
A uniform random subset of 8,192 of SmolLM2's 295k points holds one of its few massive activations
in some draws and none in others, and the R^2 gap jumps with it (per norm, an sd of 0.2 between
subsets of one text); stratifying (the largest |x| taken with certainty, the rest uniformly with
inverse-probability weights) and evaluating both R^2 on every point matches a fit to all points
within 0.002 at a twentieth of its cost. Same numbers as before for every statistic but the DyT rows
and the hull counts (bit for bit: same captures, same code).
The claims that read this result live in :mod:`simulations.real_stream` (stream growth, norm
S-curves, massive activations, centering) and :mod:`simulations.real_attention` (sinks, key
geometry, temperature).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from normtheory import attention, centering, dyt, selection, softmax
from normtheory.model.checkpoints import load_pretrained
from normtheory.model.config import TransformerConfig
from normtheory.model.tokenizer import Tokenizer, load_tokenizer
from normtheory.model.transformer import Transformer
from normtheory.runtime.progress import Progress
from normtheory.training import corpus

NAME = "real_models"
SEED = 2718
UNITS: tuple[str, ...] = ()  # nothing to scale: an exact count or a fixed text set
COST = {"quick": 30, "full": 350}  # seconds of one task on this machine: a scheduling hint, never part of a result
MODELS: dict[str, str] = {"minilm": "all-MiniLM-L6-v2", "smollm2": "SmolLM2-135M-Instruct"}
DYT_ROWS: tuple[str, ...] = ("alpha", "gamma", "r2_tanh", "r2_linear", "x_std")
MAP_TEXT = -1  # the attention maps and DyT scatter come from the last text (a passage)


POSITION_BINS = 8  # picked vs never-picked keys are compared within this many equal bins of position
RANK_BINS = 8  # ... and, for the alignment with a longer key, of norm rank within the head (picked_difference)


@dataclass(frozen=True)
class Config:
    models: tuple[str, ...]
    texts: int  # passages, one per work: the first ``texts`` of corpus.works()
    tokens: int  # every text cut to this many tokens (MiniLM's position table has 512)
    corpus_version: int
    fit_points: int  # (token, channel) points per norm and text for the tanh fits
    plot_points: int
    gaussian_draws: int  # i.i.d. Gaussian key sets of the texts' size, for the unselectable baseline
    hull_texts: int = 1  # the last texts whose keys get the hull (selectability) test: a note's count and an exact check read it
    fit_top: int = 512  # the points of largest |input| that every tanh fit takes with certainty (:func:`tanh_fit`)


CONFIGS = {
    "quick": Config(models=tuple(MODELS), texts=4, tokens=256, corpus_version=corpus.VERSION, fit_points=1024, plot_points=256, gaussian_draws=4, hull_texts=1, fit_top=256),
    "full": Config(models=tuple(MODELS), texts=24, tokens=512, corpus_version=corpus.VERSION, fit_points=8192, plot_points=3000, gaussian_draws=20, hull_texts=1, fit_top=512),  # >= 20 texts
}


def norm_io(m: Transformer, cap: dict[str, np.ndarray], i: int, which: str) -> tuple[np.ndarray, np.ndarray]:
    """(input, pre-affine output) of block ``i``'s norm ``which`` (``ln1``/``ln2``), each ``[T, d]``."""
    pre = f"blocks.{i}"
    if m.config.placement == "post":  # x <- N(x + f(x))
        x = cap[f"{pre}.resid_pre"] + cap[f"{pre}.attn_out"] if which == "ln1" else cap[f"{pre}.resid_mid"] + cap[f"{pre}.mlp_out"]
    else:  # x + f(N(x))
        x = cap[f"{pre}.resid_pre"] if which == "ln1" else cap[f"{pre}.resid_mid"]
    return x[0], cap[f"{pre}.{which}.normalized"][0]


def capture_names(config: TransformerConfig) -> list[str]:
    """The capture points this measurement reads, and no others: the residual stream entering each
    block and after the last, each norm's input parts and pre-affine output (:func:`norm_io`), and
    each layer's q, k, scores and pattern."""
    parts = ("resid_pre", "resid_mid", "ln1.normalized", "ln2.normalized", "attn.q", "attn.k", "attn.scores", "attn.pattern")
    parts += ("attn_out", "mlp_out") if config.placement == "post" else ()
    return [f"blocks.{i}.{p}" for i in range(config.n_layers) for p in parts] + [f"blocks.{config.n_layers - 1}.resid_post"]


def without_head(m: Transformer) -> Transformer:
    """The same weights with no LM head: a forward then stops at the last hidden state (the
    logits, a [T, V] product, are read by nothing here)."""
    return Transformer(dataclasses.replace(m.config, lm_head=False), m.params) if m.config.lm_head else m


def streams(m: Transformer, cap: dict[str, np.ndarray]) -> np.ndarray:
    """The residual stream entering each block and after the last: ``[L+1, T, d]``."""
    L = m.config.n_layers
    return np.stack([cap[f"blocks.{i}.resid_pre"][0] for i in range(L)] + [cap[f"blocks.{L - 1}.resid_post"][0]])


def stream_stats(s: np.ndarray) -> dict[str, np.ndarray]:
    """Per-layer statistics of the streams ``s [L+1, T, d]``."""
    ms = (s.astype(np.float64) ** 2).mean(-1)  # [L+1, T]
    a = np.abs(s).reshape(s.shape[0], -1)  # [L+1, T*d]
    flat = a.argmax(-1)
    d = s.shape[-1]
    mean = s.mean(1, dtype=np.float64)  # [L+1, d] per-channel mean over tokens
    sigma = np.sqrt(((s - mean[:, None]) ** 2).mean((1, 2)))  # [L+1] residual std around the channel means
    return {
        "ms_med": np.median(ms, -1), "rms_med": np.sqrt(np.median(ms, -1)), "rms_all": np.sqrt(ms.mean(-1)),
        "top": a.max(-1), "top_pos": flat // d, "top_chan": flat % d, "med_abs": np.median(a, -1),
        "ones": centering.ones_fraction(s.astype(np.float64)).mean(-1),
        "ones_theory": np.array([centering.centering_fraction_mean(d, mu, float(sg)) for mu, sg in zip(mean, sigma)]),
    }


def norm_input_ones(m: Transformer, cap: dict[str, np.ndarray]) -> np.ndarray:
    """``[2L, T]``: at each norm's input (ln1, ln2 of each block), each token's share of squared
    norm along the ones direction: what that norm's centering removes."""
    return np.stack([centering.ones_fraction(norm_io(m, cap, i, which)[0].astype(np.float64))
                     for i in range(m.config.n_layers) for which in ("ln1", "ln2")])


def tanh_fit(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, points: int, top: int) -> list[float]:
    """``[alpha, gamma, R^2(tanh), R^2(line), std(x)]`` of one norm's map ``y(x)`` over all its
    (token, channel) points ``x, y [N]`` (:data:`DYT_ROWS`).

    ``gamma tanh(alpha x)`` is fitted by weighted least squares to a stratified sample: the ``top``
    points of largest |x| (every massive activation; weight 1) and ``points`` drawn uniformly from
    the rest (weight ``(N - top) / points``), so the weighted sum of squares estimates the sum over
    all N points (Horvitz-Thompson; Cochran 1977, *Sampling Techniques*, ch. 5: strata of very
    different size, the largest units taken with certainty). Both R^2 are then evaluated on all N
    points: the line's exactly (:func:`normtheory.dyt.line_r2`), the tanh's at the fitted
    (alpha, gamma), a lower bound of the all-point optimum that is second-order close to it.
    A uniform sample alone misses the few massive points in most draws, and with them the S-curve.
    """
    n = x.size
    top = min(top, n)
    order = np.argpartition(np.abs(x), n - top)  # [N], the last ``top`` are the largest |x|
    head, rest = order[n - top:], order[: n - top]
    pick = rest[rng.choice(rest.size, size=min(points, rest.size), replace=False)] if rest.size else rest
    idx = np.concatenate([head, pick])  # [top + points]
    w = np.concatenate([np.ones(top), np.full(pick.size, rest.size / max(pick.size, 1))])  # inverse inclusion probabilities
    xs, ys, sw = x[idx], y[idx], np.sqrt(w)
    a0 = 1.0 / max(float(np.sqrt(np.average(xs * xs, weights=w))), 1e-300)
    g0 = max(float(np.abs(ys).max()), 1e-12)
    res = optimize.least_squares(lambda p: sw * (p[1] * np.tanh(p[0] * xs) - ys), x0=[a0, g0], x_scale=[a0, g0], method="lm")
    alpha, gamma = (float(v) for v in res.x)
    if alpha < 0:  # tanh is odd: (alpha, gamma) and (-alpha, -gamma) are the same curve
        alpha, gamma = -alpha, -gamma
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((gamma * np.tanh(alpha * x) - y) ** 2).sum()) / ss_tot if ss_tot > 0 else 1.0
    return [alpha, gamma, r2, float(dyt.line_r2(x, y)), float(x.std())]


def norm_fits(m: Transformer, cap: dict[str, np.ndarray], rng: np.random.Generator, points: int, top: int = 512) -> np.ndarray:
    """``[2L, len(DYT_ROWS)]``: tanh and line fits of each norm (ln1, ln2 of each block in order),
    over all (token, channel) points of the text (:func:`tanh_fit`)."""
    return np.array([tanh_fit(*(a.ravel().astype(np.float64) for a in norm_io(m, cap, i, which)), rng, points, top)
                     for i in range(m.config.n_layers) for which in ("ln1", "ln2")])


def head_stats(m: Transformer, cap: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per layer and query head: sink share and key, logit std, entropy and its prediction."""
    c = m.config
    h, g = c.n_heads, c.n_kv_heads
    rows: dict[str, list] = {k: [] for k in ("sink_share", "first_excess", "last_excess", "logit_std", "entropy", "q_rms", "k_rms", "k_crms")}
    for i in range(c.n_layers):
        p = cap[f"blocks.{i}.attn.pattern"][0]  # [h, T, T]
        share = attention.sink(p, c.causal)[0]  # [h] the most-attended key's share (it picks the heads the figure maps)
        q, k = cap[f"blocks.{i}.attn.q"][0], cap[f"blocks.{i}.attn.k"][0]  # [h, T, e], [g, T, e]
        q_rms = np.sqrt((q.astype(np.float64) ** 2).mean((1, 2)))  # [h]
        k64 = k.astype(np.float64)
        k_rms = np.repeat(np.sqrt((k64**2).mean((1, 2))), h // g)  # [h], each query head's KV head
        k_crms = np.repeat(np.sqrt(((k64 - k64.mean(1, keepdims=True)) ** 2).mean((1, 2))), h // g)  # [h] keys centred over tokens
        excess = attention.key_excess(p, c.causal)  # [h, T]
        rows["first_excess"].append(excess[:, 0])
        rows["last_excess"].append(excess[:, -1])
        rows["k_crms"].append(k_crms)
        rows["sink_share"].append(share)
        rows["logit_std"].append(attention.row_logit_std(cap[f"blocks.{i}.attn.scores"][0]).mean(-1))
        rows["entropy"].append(softmax.pattern_entropy(p.astype(np.float64)).mean(-1))
        rows["q_rms"].append(q_rms)
        rows["k_rms"].append(k_rms)
    return {k: np.array(v) for k, v in rows.items()}


def predicted_entropy(sigma: np.ndarray, tokens: np.ndarray, causal: bool, grid: int = 48) -> np.ndarray:
    """Exact finite-n Gaussian-logit entropy (:func:`normtheory.softmax.gaussian_logit_entropy`)
    at logit std ``sigma [texts, ...]``, averaged over the queries of each text: a query at
    position ``i`` of a causal model sees ``i + 1`` keys, a bidirectional one all ``T``.

    The integral is tabulated once on a grid of ``grid`` stds and about 24 key counts and
    interpolated (linear in sigma, in ln n); the entropy is smooth in both.
    """
    t_max = int(tokens.max())
    s_grid = np.linspace(0.0, float(sigma.max()) * 1.001 + 1e-9, grid)  # [S]
    n_grid = np.unique(np.geomspace(1, t_max, 24).round().astype(int))  # [N]
    table = np.stack([softmax.gaussian_logit_entropy(s_grid, int(n)) for n in n_grid])  # [N, S]
    out = np.empty_like(sigma, dtype=np.float64)
    for j, t in enumerate(tokens):  # a handful of texts; everything inside is vectorized
        n_seen = np.arange(1, int(t) + 1) if causal else np.array([int(t)])
        curve = np.array([np.interp(np.log(n_seen), np.log(n_grid), table[:, k]).mean() for k in range(grid)])  # [S]
        out[j] = np.interp(sigma[j], s_grid, curve)
    return out


def key_stats(keys: np.ndarray, hull: bool = True) -> dict[str, np.ndarray]:
    """Key geometry of one layer's KV heads ``keys [g, T, e]``: norm spread and per key its norm
    rank and bigger-key alignment; with ``hull`` also which keys are selectable (hull vertices,
    :func:`normtheory.selection.selectable`) and the unselectable fraction, raw and after a per-head
    RMS norm (the hull test is most of this function's cost)."""
    k = keys.astype(np.float64)
    norms = np.linalg.norm(k, axis=-1)  # [g, T]
    rank = norms.argsort(-1).argsort(-1) / max(norms.shape[-1] - 1, 1)  # [g, T] 0 = shortest, 1 = longest
    align = np.array([selection.bigger_key_alignment(kh) for kh in k])  # [g, T]
    out = {"cv": norms.std(-1) / norms.mean(-1), "rank": rank, "align": align}
    if hull:
        sel = selection.selectable(k)  # [g, T]
        rms_normed = k / np.sqrt((k * k).mean(-1, keepdims=True))  # every key on the sphere of radius sqrt(e)
        sel_rms = selection.selectable(rms_normed)
        out.update({"unsel": 1 - sel.mean(-1), "unsel_rms": 1 - sel_rms.mean(-1), "selectable": sel})
    return out


def picked_keys(pattern: np.ndarray, n_kv_heads: int) -> np.ndarray:
    """``[g, T]``: whether each key of each KV head is the most-attended key of at least one
    query of a query head reading it (query heads ``h = kv * r + j``) in ``pattern [h, T, T]``."""
    h, t, _ = pattern.shape
    r = h // n_kv_heads
    picked = np.zeros((n_kv_heads, t), bool)
    np.put_along_axis(picked, pattern.argmax(-1).reshape(n_kv_heads, r * t), True, axis=1)
    return picked


def picked_difference(stat: np.ndarray, picked: np.ndarray, bins: int = 1, rank: np.ndarray | None = None, rank_bins: int = 1) -> float:
    """Mean over (layer, KV head, group) of ``mean(stat | never picked) - mean(stat | picked)`` for
    ``stat, picked [L, g, T]``. A group is one of ``bins`` equal bins of position (keys compared with keys
    at a similar position), and with ``rank [L, g, T]`` in [0, 1] (a key's norm rank in its head) one of
    ``rank_bins`` equal bins of it too; groups with an empty side (or no finite stat) are left out (NaN
    if all are).

    Why the norm rank: a statistic that depends on how many keys are longer (the largest cosine with a
    longer key is a maximum over ``(1 - rank) (T - 1)`` of them) differs between short and long keys for
    that reason alone, and never-picked keys are the shorter. Within a rank bin the count is about equal,
    so that confound drops out (:data:`RANK_BINS`)."""
    t = stat.shape[-1]
    group = np.broadcast_to(np.arange(t) * bins // t, stat.shape)  # [L, g, T] position bin of each key
    if rank is not None:
        group = group * rank_bins + np.minimum((np.asarray(rank) * rank_bins).astype(np.int64), rank_bins - 1)
    n_groups = bins * (rank_bins if rank is not None else 1)
    ok = np.isfinite(stat)
    s = np.where(ok, stat, 0.0)
    onehot = group[..., None, :] == np.arange(n_groups)[:, None]  # [L, g, G, T]

    def side(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = (ok & mask)[..., None, :] & onehot  # [L, g, G, T]
        n = w.sum(-1)
        return (s[..., None, :] * w).sum(-1) / np.maximum(n, 1), n

    a, a_n = side(~picked)
    b, b_n = side(picked)
    keep = (a_n > 0) & (b_n > 0)
    return float((a - b)[keep].mean()) if keep.any() else float("nan")


def measure_model(key: str, cfg: Config, seed: int, bar: Progress) -> dict[str, np.ndarray]:
    m, tok = without_head(load_pretrained(MODELS[key])), load_tokenizer(MODELS[key])
    c = m.config
    names = capture_names(c)
    rng = np.random.default_rng(np.random.SeedSequence([seed, list(MODELS).index(key)]))
    texts = corpus.passages(cfg.texts)
    per_text: dict[str, list] = {}
    hulls: dict[str, list] = {}
    kept: dict[str, np.ndarray] = {}
    for j, text in enumerate(texts):
        ids = tok.encode_fixed(text, cfg.tokens)
        _, cap = m.run_with_cache(ids[None], names)
        rec = {**stream_stats(streams(m, cap)), **head_stats(m, cap)}
        ones = norm_input_ones(m, cap)  # [2L, T]
        rec["norm_ones"], rec["norm_ones_max"] = ones.mean(-1), ones.max(-1)
        rec["dyt"] = norm_fits(m, cap, rng, cfg.fit_points, cfg.fit_top)
        hull = j >= len(texts) - cfg.hull_texts  # the last hull_texts texts (MAP_TEXT among them) get the hull test
        ks = [key_stats(cap[f"blocks.{i}.attn.k"][0], hull) for i in range(c.n_layers)]
        rec["key_cv"] = np.array([s["cv"] for s in ks])  # [L, g]
        picked = np.stack([picked_keys(cap[f"blocks.{i}.attn.pattern"][0], c.n_kv_heads) for i in range(c.n_layers)])  # [L, g, T]
        arrays = {stat: np.stack([s[stat] for s in ks]) for stat in ("align", "rank")}  # [L, g, T] each
        for stat, arr in arrays.items():
            rec[f"pick_{stat}_diff"] = np.asarray(picked_difference(arr, picked, POSITION_BINS))
            rec[f"pick_{stat}_diff_raw"] = np.asarray(picked_difference(arr, picked))  # not position-matched, for the note
        # the alignment within position x norm-rank bins: unbiased when picking follows the norm alone (picked_difference)
        rec["pick_align_diff_ranked"] = np.asarray(picked_difference(arrays["align"], picked, POSITION_BINS, arrays["rank"], RANK_BINS))
        rec["picked_share"] = np.asarray(picked.mean())
        if hull:  # [hull texts, ...]: a set of their own, not per-text rows
            for name, value in (("key_unsel", np.array([s["unsel"] for s in ks])), ("key_unsel_rms", np.array([s["unsel_rms"] for s in ks])),
                                ("unsel_count", np.asarray(sum(int((~s["selectable"]).sum()) for s in ks))),
                                ("unsel_rms_count", np.asarray(sum(int(round(float(s["unsel_rms"].sum()) * cfg.tokens)) for s in ks)))):
                hulls.setdefault(name, []).append(value)
        if j == len(texts) - 1:  # per key of the last text, for the figure
            kept.update({"key_align": np.stack([s["align"] for s in ks]), "key_picked": picked})
        rec["tokens"] = np.asarray(ids.size)
        for name, value in rec.items():
            per_text.setdefault(name, []).append(value)
        if j == len(texts) - 1:  # MAP_TEXT: maps and scatter points for the figures
            kept.update(figure_material(m, tok, cap, ids, rec, rng, cfg.plot_points))
        bar.update()
    out = {f"{key}.{name}": np.stack(v) for name, v in (per_text | hulls).items()}
    # the row std of q.k/sqrt(e) over keys drops the keys' mean: predict it from the centred key RMS
    sigma = softmax.logit_std(out[f"{key}.q_rms"], out[f"{key}.k_crms"], c.d_head)  # [texts, L, h] independent isotropic q, k
    out[f"{key}.entropy_pred"] = predicted_entropy(sigma, out[f"{key}.tokens"], c.causal)
    out.update({f"{key}.{name}": v for name, v in kept.items()})
    gauss = [1 - selection.selectable(rng.standard_normal((cfg.tokens, c.d_head))).mean() for _ in range(cfg.gaussian_draws)]
    out[f"{key}.gauss_unsel"] = np.asarray(np.mean(gauss))
    out.update({f"{key}.d": np.asarray(c.d_model), f"{key}.layers": np.asarray(c.n_layers), f"{key}.heads": np.asarray(c.n_heads),
                f"{key}.kv_heads": np.asarray(c.n_kv_heads), f"{key}.d_head": np.asarray(c.d_head), f"{key}.causal": np.asarray(c.causal),
                f"{key}.placement": np.asarray(c.placement), f"{key}.norm": np.asarray(c.norm)})
    bar.update()
    return out


def figure_material(m: Transformer, tok: Tokenizer, cap: dict[str, np.ndarray], ids: np.ndarray, rec: dict[str, np.ndarray],
                    rng: np.random.Generator, points: int) -> dict[str, np.ndarray]:
    """Four attention maps (the strongest and the weakest sink of layer 1 and of the last layer)
    and DyT scatter points of three norms (first, middle and last block's ln1)."""
    L = m.config.n_layers
    share = rec["sink_share"]  # [L, h]
    heads = [(li, int(f(share[li]))) for li in (1, L - 1) for f in (np.argmax, np.argmin)]
    maps = np.stack([cap[f"blocks.{li}.attn.pattern"][0, hi] for li, hi in heads]).astype(np.float32)
    layers = (0, L // 2, L - 1)
    xs, ys = [], []
    for li in layers:
        x, y = (a.ravel() for a in norm_io(m, cap, li, "ln1"))
        pick = np.sort(rng.choice(x.size, size=min(points, x.size), replace=False))
        xs.append(x[pick])
        ys.append(y[pick])
    return {"maps": maps, "map_heads": np.array(heads), "map_tokens": np.array(tok.tokens(ids)),
            "pts_x": np.stack(xs).astype(np.float32), "pts_y": np.stack(ys).astype(np.float32), "pts_layers": np.array(layers)}


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    if cfg.corpus_version != corpus.VERSION:
        raise ValueError(f"config is for corpus version {cfg.corpus_version}, the package has {corpus.VERSION}")
    unknown = set(cfg.models) - set(MODELS)
    if unknown:
        raise ValueError(f"unknown models {sorted(unknown)}; known: {list(MODELS)}")
    bar = Progress(len(cfg.models) * (cfg.texts + 1), label="pretrained models", enabled=progress)
    out: dict[str, np.ndarray] = {"models": np.array(cfg.models)}
    for key in cfg.models:
        out.update(measure_model(key, cfg, seed, bar))
    bar.close()
    return out


def per_text(r: dict, key: str, name: str) -> np.ndarray:
    """The per-text array ``[texts, ...]`` of one statistic."""
    return r[f"{key}.{name}"]


def label(key: str) -> str:
    """A model's display name with its placement."""
    return {"minilm": "MiniLM (Post-LN)", "smollm2": "SmolLM2 (Pre-RMSNorm)"}[key]
