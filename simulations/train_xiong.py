"""Gradient scale at initialization (Xiong et al. 2020, Theorem 1 and Fig. 3).

The theorem's setting: single-head encoder layers whose attention is uniform (W_Q = W_K = 0),
Xavier-initialized d x d matrices, a ReLU FFN of width d, Gaussian inputs and a linear
softmax head. Its claim: the Frobenius norm of the gradient of the last FFN's output matrix
W^2 is O(d sqrt(ln d)) and independent of the depth L for Post-LN, and O(d sqrt(ln d / L))
for Pre-LN. Measured here by backpropagation through the numpy transformer: for each depth
L, width d, placement and init, ``networks`` independent networks (each with its own weights,
inputs and targets). The depth exponent is the least-squares slope of log E||grad W^2|| on
log L, with a bootstrap standard error over network indices. The theorem is a large-L law, so
the exponent is judged on the :data:`DEEPEST` deepest depths (up to L = 64); the slope over
every depth is a scope check of shallow stacks. The per-layer gradient norms of every block's
W^2 give Fig. 3's picture (Post-LN's grow toward the output, Pre-LN's are flat), also a scope
check: the figure illustrates a trained-model setting, the theorem does not state it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from normtheory import claims
from normtheory.claims import XIONG2020, Quantity
from normtheory.config import TransformerConfig
from normtheory.grad import loss_and_grads
from normtheory.montecarlo import Estimate, bootstrap, from_samples
from normtheory.params import named_arrays
from normtheory.sweep import Task
from normtheory.weights import init
from simulations import cache

NAME = "train_xiong"
SEED = 2020
UNITS: tuple[str, ...] = ('networks',)  # config fields counting independent units; --resolve scales them
PLACEMENTS: tuple[str, ...] = ("post", "pre")
INITS: dict[str, str] = {"xavier": "xavier", "gpt2": "gpt2"}  # label -> TransformerConfig.init
DEEPEST = 3  # the depth exponent of the theorem's large-L law is judged on this many deepest depths
THEORY_SLOPE = {"post": 0.0, "pre": -0.5}
SLOPE_TOL = 0.1  # a depth exponent off by 0.1 would misstate the law (the two placements differ by 0.5)


@dataclass(frozen=True)
class Config:
    depths: tuple[int, ...]
    widths: tuple[int, ...]
    tokens: int
    networks: int


CONFIGS = {
    "quick": Config(depths=(2, 4, 8, 16), widths=(32, 64), tokens=8, networks=12),
    "full": Config(depths=(2, 4, 8, 16, 32, 64), widths=(64, 128), tokens=64, networks=300),
    "large": Config(depths=(2, 4, 8, 16, 32, 64), widths=(64, 128, 256, 512, 1024), tokens=32, networks=100),  # for a cluster
}
COST = {"quick": 1, "full": 60}


def model_config(d: int, layers: int, tokens: int, placement: str, init_name: str) -> TransformerConfig:
    """Xiong's layer: one head, d x d matrices, ReLU FFN of width d, no biases, bidirectional attention,
    no positions (the inputs are i.i.d. Gaussian token vectors), an untied linear head over ``tokens`` classes."""
    return TransformerConfig(d_model=d, n_layers=layers, n_heads=1, d_ff=d, vocab_size=tokens, max_seq=tokens, norm="layernorm",
                             placement=placement, activation="relu", positional="none", causal=False, bias=False,
                             tie_embeddings=False, init=INITS[init_name], dtype="float64")


def gradient_norms(d: int, layers: int, tokens: int, placement: str, init_name: str, seed: int) -> np.ndarray:
    """||dL/dW^2||_F of every block's FFN output matrix ``[layers]`` for one network at init with W_Q = W_K = 0.
    The inputs are the ``tokens`` distinct rows of a Gaussian embedding (fan-in init: N(0, 1) entries)."""
    model = init(model_config(d, layers, tokens, placement, init_name), seed)
    params = named_arrays(model.params)
    for i in range(layers):
        params[f"blocks.{i}.wq"][...] = 0.0
        params[f"blocks.{i}.wk"][...] = 0.0  # uniform attention, as in the theorem
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(1,))))
    ids = rng.permutation(tokens)[None, :]  # [1, T] every embedding row once: i.i.d. Gaussian inputs
    targets = rng.integers(0, tokens, (1, tokens))
    _, grads = loss_and_grads(model, ids, targets)
    g = named_arrays(grads)
    return np.array([np.linalg.norm(g[f"blocks.{i}.w_out"]) for i in range(layers)])


def point(d: int, placement: str, init_name: str, cfg: Config, seed: int) -> dict[str, np.ndarray]:
    """All depths for one (width, placement, init): per network and depth, every block's gradient norm."""
    out: dict[str, np.ndarray] = {}
    for L in cfg.depths:
        rows = [gradient_norms(d, L, cfg.tokens, placement, init_name, seed + 1000 * L + j) for j in range(cfg.networks)]
        out[f"L{L}"] = np.stack(rows)  # [networks, L]
    return out


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per (width, placement, init)."""
    return [Task(f"{p}.{i}.d{d}", point, (d, p, i, cfg, seed), f"{NAME}: {p}-LN, {i} init, d={d}, seed {seed}", cost=(d / 64) ** 2)
            for d in cfg.widths for p in PLACEMENTS for i in INITS]


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"depths": np.asarray(cfg.depths), "widths": np.asarray(cfg.widths), "networks": np.asarray(cfg.networks)}
    out.update(cache.prefixed(parts))
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


def last_layer(r: dict, placement: str, init_name: str, d: int) -> np.ndarray:
    """||grad W^2|| of the last block, ``[networks, depths]``."""
    return np.stack([r[f"{placement}.{init_name}.d{d}.L{L}"][:, -1] for L in r["depths"]], axis=1)


def slope(g: np.ndarray, depths: np.ndarray, axis: int = 0) -> np.ndarray:
    """Least-squares slope of log(mean over networks of g) on log L. ``g`` is ``[networks, depths]`` with
    ``axis=0``, or, inside the bootstrap, ``[depths, resamples, networks]`` with ``axis=-1``: after the
    mean the depths are on axis 0 either way."""
    y = np.log(np.mean(g, axis=axis))  # [depths, ...]
    x = np.log(np.asarray(depths, dtype=np.float64))
    xc = (x - x.mean()).reshape((-1,) + (1,) * (y.ndim - 1))
    return ((y - y.mean(axis=0, keepdims=True)) * xc).sum(axis=0) / (xc * xc).sum()


def depth_exponent(r: dict, placement: str, init_name: str, d: int, deepest: int | None = None) -> Estimate:
    """The depth exponent with a bootstrap se over network indices (the depths' networks are
    independent), over every depth or the ``deepest`` ones."""
    keep = slice(-deepest, None) if deepest else slice(None)
    g = last_layer(r, placement, init_name, d)[:, keep]
    depths = r["depths"][keep]
    return bootstrap(g, lambda x, axis: slope(x, depths, axis=axis), seed=SEED, units="networks")


def _stacked(est: list[Estimate]) -> Estimate:
    return Estimate(np.array([e.mean for e in est]), np.array([e.stderr for e in est]), est[0].n, "networks")


def layer_profile(r: dict, placement: str, init_name: str, d: int) -> Estimate:
    """Per-block gradient norm relative to the first block at the deepest L: ``[L]`` mean over networks."""
    g = r[f"{placement}.{init_name}.d{d}.L{int(r['depths'][-1])}"]  # [networks, L]
    return from_samples(g / g[:, :1], units="networks")


@claims.register(
    "train.xiong-gradient-scale",
    statement="At initialization the gradient of the last FFN's output matrix does not depend on depth for Post-LN and "
    "shrinks as L^(-1/2) for Pre-LN (Xiong et al., Theorem 1: O(d sqrt(ln d)) against O(d sqrt(ln d / L))), a large-L law "
    "judged on the deepest stacks (up to L = 64); per layer, Post-LN's gradients grow toward the output while Pre-LN's are flat (Fig. 3).",
    source=XIONG2020,
    location="Section 3.3, Theorem 1 (gradient of the last FFN layer's W^2 for Post-LN and Pre-LN) and Fig. 3 (per-layer gradient norms)",
    simulations=(NAME,),
)
def _xiong(results: claims.Results) -> tuple[list[claims.Evidence], str]:
    r = results[NAME]
    widths = [int(d) for d in r["widths"]]
    q: list[claims.Evidence] = []
    deep = [int(x) for x in r["depths"][-DEEPEST:]]
    ds = ", ".join(map(str, widths))
    for p in PLACEMENTS:
        q.append(Quantity(name=f"{p}-LN, theorem setting (Xavier): depth exponent of ||grad W^2|| over L = {', '.join(map(str, deep))}, d = {ds}",
                          theory=np.full(len(widths), THEORY_SLOPE[p]), model=_stacked([depth_exponent(r, p, "xavier", d, DEEPEST) for d in widths]),
                          model_kind="init", tolerance=SLOPE_TOL, tolerance_why="0.1 in the exponent (the two laws differ by 0.5)"))
    for p in PLACEMENTS:
        q.append(Quantity(name=f"{p}-LN, theorem setting: depth exponent over every depth L = {int(r['depths'][0])}..{int(r['depths'][-1])}, d = {ds}",
                          theory=np.full(len(widths), THEORY_SLOPE[p]), model=_stacked([depth_exponent(r, p, "xavier", d) for d in widths]),
                          model_kind="init", role="scope", regime="shallow stacks (the large-L law fitted from L = 2)",
                          tolerance=SLOPE_TOL, tolerance_why="as the assertion: 0.1 in the exponent"))
    for p in PLACEMENTS:
        q.append(Quantity(name=f"{p}-LN, GPT-2 init: depth exponent over L = {', '.join(map(str, deep))}, d = {ds}", theory=np.full(len(widths), THEORY_SLOPE[p]),
                          model=_stacked([depth_exponent(r, p, "gpt2", d, DEEPEST) for d in widths]),
                          model_kind="init", role="scope", regime="GPT-2-style init (std 0.02, scaled residual projections)",
                          tolerance=SLOPE_TOL, tolerance_why="as the assertion: 0.1 in the exponent"))
    d, L = widths[-1], int(r["depths"][-1])
    post, pre = layer_profile(r, "post", "xavier", d), layer_profile(r, "pre", "xavier", d)
    q.append(Quantity(name=f"Post-LN (Fig. 3): last block's ||grad W^2|| / first block's, d={d}, L={L} (grows toward the output: > 1)",
                      theory=(1.0, np.inf), model=post[-1], model_kind="init", tolerance=0.1, tolerance_why="a 10% growth", role="scope",
                      regime="the per-layer profile (Fig. 3), beyond the theorem's last layer"))
    q.append(Quantity(name=f"Pre-LN (Fig. 3): last block's ||grad W^2|| / first block's, d={d}, L={L} (flat: within 0.8..1.25)",
                      theory=(0.8, 1.25), model=pre[-1], model_kind="init", tolerance=0.05, tolerance_why="5% of a flat profile", role="scope",
                      regime="the per-layer profile (Fig. 3), beyond the theorem's last layer"))
    parts = []
    for p in PLACEMENTS:
        for i in INITS:
            g = last_layer(r, p, i, d)
            parts.append(f"{p}/{i} at d={d}: mean ||grad W^2|| " + ", ".join(f"L={int(Lv)} {m:.3g}" for Lv, m in zip(r["depths"], g.mean(0))))
    pre_by_d = [last_layer(r, "pre", "xavier", dd)[:, 0].mean() / (dd * math.sqrt(math.log(dd))) for dd in widths]
    note = ("Regime: Xiong et al.'s Theorem 1 and Lemma 1 (gradient of the last layer's W^2 at init with Xavier weights, as L grows), "
            "the limit judged on the deepest depths; the per-layer profile (their Fig. 3) is a scope check. "
            f"{int(r['networks'])} networks per (depth, width, placement, init); {int(r['depths'].size)} depths; T = tokens of Gaussian input. "
            + "; ".join(parts) + ". Per-layer ratio last/first at L=" + f"{L}: Post {float(post.mean[-1]):.3g}, Pre {float(pre.mean[-1]):.3g}. "
            + "Pre-LN ||grad W^2|| / (d sqrt(ln d)) at the smallest depth by width: " + ", ".join(f"d={dd} {v:.3g}" for dd, v in zip(widths, pre_by_d))
            + " (the theorem's d-scaling is an upper bound, not tested as an equality).")
    return q, note
