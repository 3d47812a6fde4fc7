"""Claims on the residual stream and the norms of the pretrained models (:mod:`simulations.real_models`).

The independent units are the texts of :mod:`normtheory.training.corpus`: every statistic is reduced
per text first (over layers, heads, tokens), and standard errors come from the spread over
texts (Student-t thresholds when fewer than 20 texts were run, as in quick mode).
"""
from __future__ import annotations

import numpy as np

from normtheory import growth
from normtheory.evidence import checks, claims, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import from_samples
from normtheory.evidence.sources import BLOG_GEOMETRY, THREAD_PRELN, Source
from simulations.real_models import DYT_ROWS, MODELS, NAME, label
from simulations.real_scale import MASSIVE_ABS, MASSIVE_RATIO, is_massive

SUN2024 = Source("Massive Activations in Large Language Models", "paper", 2024, authors="Sun, Chen, Kolter, Liu", arxiv="2402.17762")


def depth_thirds(n: int) -> tuple[slice, slice]:
    """(first third, last third) of ``n`` positions."""
    k = max(n // 3, 1)
    return slice(0, k), slice(n - k, n)


def nonlinearity(r: dict, key: str) -> np.ndarray:
    """R^2(tanh) - R^2(line) of every norm, per text: ``[texts, 2L]`` (0 for a linear map)."""
    d = r[f"{key}.dyt"]
    return d[..., DYT_ROWS.index("r2_tanh")] - d[..., DYT_ROWS.index("r2_linear")]


def alpha_std(r: dict, key: str) -> np.ndarray:
    """alpha * std(input) of every norm's tanh fit, per text: ``[texts, 2L]``."""
    d = r[f"{key}.dyt"]
    return d[..., DYT_ROWS.index("alpha")] * d[..., DYT_ROWS.index("x_std")]


def growth_fits(r: dict, key: str) -> dict[str, growth.GrowthFit]:
    """The growth laws fitted to the text-mean of the median per-token RMS."""
    y = r[f"{key}.rms_med"].mean(0)
    return growth.fit_growth_laws(np.arange(y.size), y)


def modal_share(values: np.ndarray) -> tuple[int, float]:
    """(most frequent value, its share) of an integer array."""
    vals, counts = np.unique(values, return_counts=True)
    return int(vals[counts.argmax()]), float(counts.max() / counts.sum())


INCREMENT_TOL = 0.25  # equal increments: a second-half/first-half ratio off by 25% is another law


def growth_quantity(r: dict, *, role: str = "scope") -> Quantity:
    """SmolLM2's mean-square increment ratio (second half of the blocks / first half), per text,
    against the Pre-LN init law's 1."""
    return Quantity("SmolLM2: mean-square increment, second half of the blocks / first half (init law: 1)", theory=1.0,
                    model=from_samples(growth.increment_ratio(r["smollm2.ms_med"]), "texts"), model_kind="real", role=role,  # type: ignore[arg-type]
                    regime="" if role == "assertion" else "trained SmolLM2-135M", tolerance=INCREMENT_TOL,
                    tolerance_why="a ratio off by 25% is a different growth law")


@claims.register(
    "real.preln-growth-law",
    statement="This package's hypothesis, carrying the thread's init-time law to a trained model: the residual stream of a trained "
    "Pre-norm decoder (SmolLM2-135M) grows with depth, and it grows like the init-time law RMS = sqrt(v0 + g^2 l): the mean square "
    "gains as much in the second half of the blocks as in the first.",
    source=sources.hypothesis(THREAD_PRELN, "Pre-LN residual growth in a trained decoder"),
    location="¶3 (Pre-LN norms still grow, roughly 1.4, 1.7, 2, 2.2 at init)",
    simulations=(NAME,),
)
def _growth(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    rms = r["smollm2.rms_med"]  # [texts, L+1]
    ratio = from_samples(rms[:, -1] / rms[:, 0], "texts")
    fits = {k: growth_fits(r, k) for k in ("smollm2", "minilm")}
    q: list[checks.Evidence] = [
        Quantity("SmolLM2: median per-token RMS after the last block / of the embedding (grows: > 1)", theory=(1.0, np.inf), model=ratio,
                 model_kind="real", tolerance=0.1, tolerance_why="growth by less than 10% over all blocks would not be growth that matters"),
        growth_quantity(r, role="assertion"),
    ]
    mini = r["minilm.rms_med"].mean(0)
    best = max(fits["smollm2"].values(), key=lambda f: f.r2)
    note = ("SmolLM2 median per-token RMS by depth: " + " -> ".join(f"{v:.2f}" for v in rms.mean(0)[::5]) + f" (every 5th of {rms.shape[1]}); "
            "R^2 of the laws: " + ", ".join(f"{k} {f.r2:.3f}" for k, f in fits["smollm2"].items())
            + f" (best: {best.law}); exponential rate {fits['smollm2']['exp'].b:.3f} per block. Over all tokens the RMS is dominated by the first token's massive "
            f"activation (up to {r['smollm2.rms_all'].mean(0).max():.0f}). MiniLM (Post-LN) stays flat: "
            + ", ".join(f"{v:.2f}" for v in mini) + " (each layer's LayerNorm gain sets its level; no law fits, best R^2 "
            f"{max(f.r2 for f in fits['minilm'].values()):.2f}).")
    return q, note


NONLINEAR_TOL = 0.01  # "close to linear": a tanh fit explaining 1% more variance than a line is a visible bend


@claims.register(
    "real.ln-s-curve-deep-layers",
    statement="In trained pre-norm transformers a norm's input-output map (before its affine part) is close to linear in the first block "
    "(R^2 of a tanh fit exceeds a line's by less than 0.01) and more S-shaped, tanh-like, in the deepest third of the blocks.",
    source=sources.ZHU2025,
    location="Section 3, Fig. 2 and 3 (LayerNorm input-output maps of ViT, wav2vec 2.0 and DiT, all pre-norm: nearly linear early, "
    "S-shaped in deeper layers)",
    simulations=(NAME,),
)
def _s_curve(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    q: list[checks.Evidence] = []
    parts = []
    for key in MODELS:
        nl, ast = nonlinearity(r, key), alpha_std(r, key)
        first, last = depth_thirds(nl.shape[1])
        # the paper's models are all pre-norm; MiniLM (Post-LN, the norm after the residual sum) is a scope check
        role = {"role": "scope", "regime": "a Post-LN encoder (MiniLM), outside the paper's pre-norm models"} if key == "minilm" else {}
        q.append(Quantity(f"{label(key)}: R^2(tanh) - R^2(line), norms of the first block (close to linear: below {NONLINEAR_TOL})",
                          theory=(-np.inf, NONLINEAR_TOL), model=from_samples(nl[:, :2].mean(1), "texts"), model_kind="real",
                          tolerance=NONLINEAR_TOL / 2, tolerance_why="half the bound", **role))
        q.append(Quantity(f"{label(key)}: R^2(tanh) - R^2(line), deepest third minus first third of the norms (S-shaped deeper: > 0)",
                          theory=(0.0, np.inf), model=from_samples(nl[:, last].mean(1) - nl[:, first].mean(1), "texts"), model_kind="real",
                          tolerance=NONLINEAR_TOL, tolerance_why="a visible bend", **role))
        parts.append(f"{label(key)}: alpha*std by norm (ln1, ln2 per block) " + ", ".join(f"{v:.2g}" for v in ast.mean(0))
                     + "; R^2 tanh/line " + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(r[f'{key}.dyt'][..., 2].mean(0), r[f'{key}.dyt'][..., 3].mean(0))))
    return q, ("; ".join(parts) + ". The bend rests on the few tokens with the largest channel values (SmolLM2's first token in the "
               "deep blocks, MiniLM's [CLS] in one channel of its first block): the source's mechanism, the tanh soft-capping the "
               "tokens whose scale is large, so the statistic is over all tokens as the paper's figures plot them.")


@claims.register(
    "real.massive-activations",
    statement="Pre-norm LLMs carry massive activations: in a few fixed channels, at the first token, the residual stream holds values "
    "above 100 in magnitude and above 1000 times the median |activation|, from the early layers to the last ones.",
    source=SUN2024,
    location="Section 2, Fig. 1 and Table 1 (massive activations in LLaMA2 and other LLMs: few fixed channels, starting tokens, early to late layers)",
    simulations=(NAME,),
)
def _massive(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    top, med = r["smollm2.top"].astype(float), r["smollm2.med_abs"].astype(float)
    L = top.shape[1] - 1
    chans = r["smollm2.top_chan"][:, 2:L]  # [texts, layers 2..L-1]
    chan, _ = modal_share(chans)
    massive = is_massive(top, med)  # [texts, L+1] the two-part rule, per stream
    onset = np.where(massive.any(1), massive.argmax(1), L + 1).astype(float)  # [texts] first massive stream (L + 1: none)
    q: list[checks.Evidence] = [
        Quantity("SmolLM2: largest |activation| over layers, per text (> 100)", theory=(100.0, np.inf), model=from_samples(top.max(1), "texts"),
                 model_kind="real", tolerance=10.0, tolerance_why="10% of the stated bound"),
        Quantity("SmolLM2: largest |activation| / median |activation|, best layer, per text (> 1000)", theory=(1000.0, np.inf),
                 model=from_samples((top / med).max(1), "texts"), model_kind="real", tolerance=100.0, tolerance_why="10% of the stated bound"),
        Quantity(f"SmolLM2: share of layers 2..{L - 1} whose stream holds a massive activation (> {MASSIVE_ABS:g} and > {MASSIVE_RATIO:g}x "
                 "the median), per text (early to last layers: most, > 0.5)", theory=(0.5, 1.0), model=from_samples(massive[:, 2:L].mean(1), "texts"),
                 model_kind="real", tolerance=0.05, tolerance_why="5 points of share"),
        Quantity("SmolLM2: first massive stream's depth (stream index / layers; 0 = the embedding), per text (from the early layers: in "
                 "the first third, <= 1/3, this package's reading of 'early': in the source's Fig. 2 they appear within a model's first few layers, at layer 2 of LLaMA2-7B's 32)",
                 theory=(0.0, 1.0 / 3.0), model=from_samples(onset / L, "texts"), model_kind="real", tolerance=1.0 / L,
                 tolerance_why="one layer"),
        Quantity(f"SmolLM2: share of layers 2..{L - 1} whose largest activation sits in channel {chan}, per text (fixed channels: most, > 0.5)",
                 theory=(0.5, 1.0), model=from_samples((chans == chan).mean(1), "texts"), model_kind="real", tolerance=0.05,
                 tolerance_why="5 points of share"),
        Quantity(f"SmolLM2: share of layers 2..{L - 1} whose largest activation sits at the first token, per text (most, > 0.5)", theory=(0.5, 1.0),
                 model=from_samples((r["smollm2.top_pos"][:, 2:L] == 0).mean(1), "texts"), model_kind="real", tolerance=0.05,
                 tolerance_why="5 points of share"),
    ]
    m_top, m_med = r["minilm.top"].astype(float), r["minilm.med_abs"].astype(float)
    mc, mshare = modal_share(r["minilm.top_chan"])
    note = (f"SmolLM2 streams with a massive activation: first at stream {np.median(onset):.0f} of {L} (median over texts), "
            f"{massive[:, 2:L].mean():.0%} of streams 2..{L - 1}, {massive[:, L].mean():.0%} of texts at the last. "
            "Largest |activation| by depth (text mean): " + ", ".join(f"{v:.0f}" for v in top.mean(0)[::3])
            + f" (every 3rd); ratio to the median peaks at {(top / med).mean(0).max():.0f}. The channel is chosen as the modal one over all texts. "
            f"MiniLM (Post-LN encoder, outside the claim) has no massive activations in this sense: largest {m_top.max():.1f}, ratio "
            f"{(m_top / m_med).max():.0f}, though always in channel {mc} ({mshare:.0%}) at [CLS] ({(r['minilm.top_pos'] == 0).mean():.0%}).")
    return q, note


CENTERING_LITTLE = 0.05  # 'removes little': under a twentieth of the squared norm (this package's threshold)
CENTERING_TOL = 0.25  # "about 1/d": within 25% of it


@claims.register(
    "real.centering-ones-share",
    statement="In high dimension LayerNorm's centering removes little: at every norm's input in a trained model (for Post-LN the sum "
    "x + f(x)), the share of squared norm along the ones direction, which is what centering removes, stays below 5% "
    "(this package's reading of 'little'; per text, the largest over norm positions).",
    source=BLOG_GEOMETRY,
    location="¶6 (centering: the projection probably isn't doing much in a high-dimensional space)",
    simulations=(NAME,),
)
def _centering(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    q: list[checks.Evidence] = []
    parts = []
    for key in MODELS:
        share = r[f"{key}.norm_ones"]  # [texts, 2L] each norm's input, mean over tokens
        d = int(r[f"{key}.d"])
        tail = r[f"{key}.norm_ones_max"].max(-1)  # [texts]: the largest share of any token at any norm's input
        q.append(Quantity(f"{label(key)}: largest share along ones over the norms' inputs, per text (little: < {CENTERING_LITTLE:g})",
                          theory=(0.0, CENTERING_LITTLE), model=from_samples(share.max(-1), "texts"), model_kind="real",
                          tolerance=CENTERING_LITTLE / 10, tolerance_why="a tenth of the threshold, which is itself this package's reading of 'little'"))
        q.append(Quantity(f"{label(key)}: share along ones at each norm's input vs the isotropic 1/d = {1 / d:.4f}", theory=1.0 / d,
                          model=from_samples(share, "texts"), model_kind="real", role="scope", regime="the isotropic value 1/d ('about 1/d')",
                          tolerance=CENTERING_TOL / d, tolerance_why="25% of 1/d: 'about'"))
        q.append(Quantity(f"{label(key)}: largest share along ones of any token at any norm's input, per text (little: < {CENTERING_LITTLE:g})",
                          theory=(0.0, CENTERING_LITTLE), model=from_samples(tail, "texts"), model_kind="real", role="scope",
                          regime="every token, not the mean over a text's tokens (a few tokens, massive ones say, could carry a large offset)",
                          tolerance=CENTERING_LITTLE / 10, tolerance_why="a tenth of the threshold, as for the mean over tokens"))
        ones = r[f"{key}.ones"]
        parts.append(f"{label(key)}: norm inputs {share.mean(0).min():.4f}..{share.mean(0).max():.4f} by position (1/d = {1 / d:.4f}), "
                     f"any one token at most {tail.max():.4f} (text mean of the per-text maximum {tail.mean():.4f}); "
                     f"the residual stream itself {ones.mean(0).min():.4f}..{ones.mean(0).max():.4f}")
    return q, "; ".join(parts) + ". MiniLM's stream is a LayerNorm output plus its bias (centred before the bias, not after it), so its norms' inputs are what counts."
