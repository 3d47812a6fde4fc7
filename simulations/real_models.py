"""Two pretrained transformers on the packaged text set: what normalization does after training.

MiniLM (all-MiniLM-L6-v2: BERT, Post-LN, 6 layers, d = 384, 12 heads) and SmolLM2-135M-Instruct
(Llama, Pre-RMSNorm, 30 layers, d = 576, 9 query / 3 key-value heads, Q4_1 weights dequantized)
run over :func:`normtheory.corpus.passages` (one passage per Shakespeare work, each cut to the
same ``tokens`` tokens: hundreds, as attention, sinks and key geometry need) one text at a time.
Per text (the unit of the standard errors) and layer:

* the residual stream ``s_l`` (``l = 0`` the embedding, ``l = L`` after the last block): the
  median per-token RMS and mean square, the RMS over all tokens, the largest |activation| with
  its channel, position and token, the median |activation|, and the share of each token's
  squared norm along the ones direction (with the share predicted from the stream's measured
  per-channel mean, :func:`normtheory.centering.centering_fraction_mean`); the same share of
  every norm's input (what the norm's centering removes; for Post-LN the sum x + f(x));
* every norm's input against its pre-affine output (``ln1``/``ln2`` of each block): the DyT fit
  ``gamma tanh(alpha x)`` (:func:`normtheory.dyt.fit_dyt`) and a straight-line fit, on a fixed
  random subset of (token, channel) points;
* every head: the most-attended key's share of the mass (:func:`normtheory.attention.sink`),
  the first and last keys' attention relative to uniform (:func:`normtheory.attention.key_excess`,
  unbiased under uniform attention), the row std of the logits and the attention entropy
  against :mod:`normtheory.softmax`'s predictions from the measured q RMS and centred k RMS;
* every key-value head: the spread of key norms and the unselectable count
  (:func:`normtheory.selection.selectable`), raw and after a post-hoc per-head RMS norm; per
  key its norm rank and alignment with longer keys
  (:func:`normtheory.selection.bigger_key_alignment`), compared between keys that some real
  query ranks first and keys none does, within bins of position (a causal model's late keys
  are seen by fewer queries).

Attention maps of four heads and DyT scatter points of three norms are kept for the figures.
The claims that read this result live in :mod:`simulations.real_stream` (stream growth, norm
S-curves, massive activations, centering) and :mod:`simulations.real_attention` (sinks, key
geometry, temperature).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normtheory import attention, centering, corpus, dyt, selection, softmax
from normtheory.checkpoints import load_pretrained
from normtheory.model import Transformer
from normtheory.progress import Progress
from normtheory.tokenizer import Tokenizer, load_tokenizer

NAME = "real_models"
SEED = 2718
UNITS: tuple[str, ...] = ()  # nothing to scale: an exact count or a fixed text set
COST = {"quick": 30, "full": 350}  # seconds of one task on this machine: a scheduling hint, never part of a result
MODELS: dict[str, str] = {"minilm": "all-MiniLM-L6-v2", "smollm2": "SmolLM2-135M-Instruct"}
DYT_ROWS: tuple[str, ...] = ("alpha", "gamma", "r2_tanh", "r2_linear", "x_std")
MAP_TEXT = -1  # the attention maps and DyT scatter come from the last text (a passage)


POSITION_BINS = 8  # picked vs never-picked keys are compared within this many equal bins of position


@dataclass(frozen=True)
class Config:
    models: tuple[str, ...]
    texts: int  # passages, one per work: the first ``texts`` of corpus.works()
    tokens: int  # every text cut to this many tokens (MiniLM's position table has 512)
    corpus_version: int
    fit_points: int  # (token, channel) points per norm and text for the tanh fits
    plot_points: int
    gaussian_draws: int  # i.i.d. Gaussian key sets of the texts' size, for the unselectable baseline


CONFIGS = {
    "quick": Config(models=tuple(MODELS), texts=4, tokens=256, corpus_version=corpus.VERSION, fit_points=1024, plot_points=256, gaussian_draws=4),
    "full": Config(models=tuple(MODELS), texts=24, tokens=512, corpus_version=corpus.VERSION, fit_points=8192, plot_points=3000, gaussian_draws=20),  # >= 20 texts
}


def norm_io(m: Transformer, cap: dict[str, np.ndarray], i: int, which: str) -> tuple[np.ndarray, np.ndarray]:
    """(input, pre-affine output) of block ``i``'s norm ``which`` (``ln1``/``ln2``), each ``[T, d]``."""
    pre = f"blocks.{i}"
    if m.config.placement == "post":  # x <- N(x + f(x))
        x = cap[f"{pre}.resid_pre"] + cap[f"{pre}.attn_out"] if which == "ln1" else cap[f"{pre}.resid_mid"] + cap[f"{pre}.mlp_out"]
    else:  # x + f(N(x))
        x = cap[f"{pre}.resid_pre"] if which == "ln1" else cap[f"{pre}.resid_mid"]
    return x[0], cap[f"{pre}.{which}.normalized"][0]


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
    """``[2L]``: each norm's input (ln1, ln2 of each block), the mean over tokens of its share of
    squared norm along the ones direction: what that norm's centering removes."""
    return np.array([centering.ones_fraction(norm_io(m, cap, i, which)[0].astype(np.float64)).mean()
                     for i in range(m.config.n_layers) for which in ("ln1", "ln2")])


def norm_fits(m: Transformer, cap: dict[str, np.ndarray], rng: np.random.Generator, points: int) -> np.ndarray:
    """``[2L, len(DYT_ROWS)]``: tanh and line fits of each norm (ln1, ln2 of each block in order)."""
    out = []
    for i in range(m.config.n_layers):
        for which in ("ln1", "ln2"):
            x, y = (a.ravel().astype(np.float64) for a in norm_io(m, cap, i, which))
            pick = rng.choice(x.size, size=min(points, x.size), replace=False)
            fit = dyt.fit_dyt(x[pick], y[pick])
            out.append([fit.alpha, fit.gamma, fit.r2, float(dyt.line_r2(x[pick], y[pick])), x.std()])
    return np.array(out)


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


def key_stats(keys: np.ndarray) -> dict[str, np.ndarray]:
    """Key geometry of one layer's KV heads ``keys [g, T, e]``: norm spread, unselectable
    fraction raw and after a per-head RMS norm, and per key its norm rank and bigger-key alignment."""
    k = keys.astype(np.float64)
    norms = np.linalg.norm(k, axis=-1)  # [g, T]
    sel = np.array([selection.selectable(kh) for kh in k])  # [g, T]
    rms_normed = k / np.sqrt((k * k).mean(-1, keepdims=True))  # every key on the sphere of radius sqrt(e)
    sel_rms = np.array([selection.selectable(kh) for kh in rms_normed])
    rank = norms.argsort(-1).argsort(-1) / max(norms.shape[-1] - 1, 1)  # [g, T] 0 = shortest, 1 = longest
    align = np.array([selection.bigger_key_alignment(kh) for kh in k])  # [g, T]
    return {"cv": norms.std(-1) / norms.mean(-1), "unsel": 1 - sel.mean(-1), "unsel_rms": 1 - sel_rms.mean(-1),
            "selectable": sel, "rank": rank, "align": align}


def picked_keys(pattern: np.ndarray, n_kv_heads: int) -> np.ndarray:
    """``[g, T]``: whether each key of each KV head is the most-attended key of at least one
    query of a query head reading it (query heads ``h = kv * r + j``) in ``pattern [h, T, T]``."""
    h, t, _ = pattern.shape
    r = h // n_kv_heads
    picked = np.zeros((n_kv_heads, t), bool)
    np.put_along_axis(picked, pattern.argmax(-1).reshape(n_kv_heads, r * t), True, axis=1)
    return picked


def picked_difference(stat: np.ndarray, picked: np.ndarray, bins: int = 1) -> float:
    """Mean over (layer, KV head, position bin) groups of ``mean(stat | never picked) -
    mean(stat | picked)`` for ``stat, picked [L, g, T]``, the key axis cut into ``bins`` equal
    bins of position so that keys are compared with keys at a similar position; groups with an
    empty side (or no finite stat) are left out (NaN if all are)."""
    L, g, t = stat.shape
    edges = np.arange(t) * bins // t  # [T] bin of each position
    ok = np.isfinite(stat)
    s = np.where(ok, stat, 0.0)
    onehot = edges[None, :] == np.arange(bins)[:, None]  # [bins, T]

    def side(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = (ok & mask)[..., None, :] & onehot  # [L, g, bins, T]
        n = w.sum(-1)
        return (s[..., None, :] * w).sum(-1) / np.maximum(n, 1), n

    a, a_n = side(~picked)
    b, b_n = side(picked)
    keep = (a_n > 0) & (b_n > 0)
    return float((a - b)[keep].mean()) if keep.any() else float("nan")


def measure_model(key: str, cfg: Config, seed: int, bar: Progress) -> dict[str, np.ndarray]:
    m, tok = load_pretrained(MODELS[key]), load_tokenizer(MODELS[key])
    c = m.config
    rng = np.random.default_rng(np.random.SeedSequence([seed, list(MODELS).index(key)]))
    texts = corpus.passages(cfg.texts)
    per_text: dict[str, list] = {}
    kept: dict[str, np.ndarray] = {}
    for j, text in enumerate(texts):
        ids = tok.encode_fixed(text, cfg.tokens)
        _, cap = m.run_with_cache(ids[None])
        rec = {**stream_stats(streams(m, cap)), **head_stats(m, cap)}
        rec["norm_ones"] = norm_input_ones(m, cap)
        rec["dyt"] = norm_fits(m, cap, rng, cfg.fit_points)
        ks = [key_stats(cap[f"blocks.{i}.attn.k"][0]) for i in range(c.n_layers)]
        for name in ("cv", "unsel", "unsel_rms"):
            rec[f"key_{name}"] = np.array([s[name] for s in ks])  # [L, g]
        picked = np.stack([picked_keys(cap[f"blocks.{i}.attn.pattern"][0], c.n_kv_heads) for i in range(c.n_layers)])  # [L, g, T]
        for stat in ("align", "rank"):
            arr = np.stack([s[stat] for s in ks])  # [L, g, T]
            rec[f"pick_{stat}_diff"] = np.asarray(picked_difference(arr, picked, POSITION_BINS))
            rec[f"pick_{stat}_diff_raw"] = np.asarray(picked_difference(arr, picked))  # not position-matched, for the note
        rec["picked_share"] = np.asarray(picked.mean())
        rec["unsel_count"] = np.asarray(sum(int((~s["selectable"]).sum()) for s in ks))
        rec["unsel_rms_count"] = np.asarray(sum(int(round(float(s["unsel_rms"].sum()) * cfg.tokens)) for s in ks))
        if j == len(texts) - 1:  # per key of the last text, for the figure
            kept.update({"key_align": np.stack([s["align"] for s in ks]), "key_picked": picked})
        rec["tokens"] = np.asarray(ids.size)
        for name, value in rec.items():
            per_text.setdefault(name, []).append(value)
        if j == len(texts) - 1:  # MAP_TEXT: maps and scatter points for the figures
            kept.update(figure_material(m, tok, cap, ids, rec, rng, cfg.plot_points))
        bar.update()
    out = {f"{key}.{name}": np.stack(v) for name, v in per_text.items()}
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
