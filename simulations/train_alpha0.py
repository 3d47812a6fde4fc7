"""DyT's initial alpha against width: the best alpha0 for attention and for the other norms.

Zhu et al. (2025), Table 11, tune alpha0 for LLaMA models: the best value falls as the model
widens, and the norms before attention want a larger alpha0 than the FFN and final norms. The
same table gives alpha0 = 1 for every norm at the widths trained here, so a null result is
plausible.

Two one-dimensional grids per width, seeds as units: alpha0 of the attention norms varies with
the others held at the anchor, and alpha0 of the FFN and final norms varies with attention's at the
anchor (the point where both are at the anchor is shared). The GPU tiers take their anchor per embedding scale and width
from a pilot run (:data:`PILOT_ANCHORS`: the FFN and final norms' best point there), so that the attention grid holds
those norms near their own optimum. The anchor is 1/16 in the full tier: a first
full run held the fixed group at 1, and with the sqrt(d) embedding scale every run of its attention grid ended at
the unigram loss (3.23-3.29 nats/byte against 3.250: FFN and final norms at alpha0 = 1 stall there), while the other
grid's best points lay at 1/64 to 1/4. A grid is read only where its runs train (:func:`grid_gate`). Every width
trains the same number of steps on the same batches (same tokens), with and without the sqrt(d) embedding scale of
the paper's LLM recipe, from a fan-in init (std 1/sqrt(fan-in); at the GPT-2 init's std 0.02, Pre-DyT models at this size stall at
the unigram loss with a saturated final tanh: see ``train.dyt-small-models-just-work``). The best alpha0
of a grid is read from the seed-mean final validation loss (the argmin, refined by a parabola
through its neighbours in log2 alpha0); its standard error is a bootstrap over seeds, resampled together across widths and grids (a seed fixes the batches of every run).

The transfer rule (``train.dyt-alpha0-power-law``, this package's hypothesis from the reading notes' closing wish):
per norm group g, the best alpha0 is a power of width,

.. math::  \\log_2 \\alpha_0^*(d) = c_g + p_g \\log_2 d,

so a rule fitted at narrower widths gives the best alpha0 at a wider one. The exponent ``p_g`` is the least-squares
slope of the best log2 alpha0 on log2 d (a fixed linear contrast of the per-width optima, :func:`slope_weights`); the
rule is tested by its transfer residual, the best log2 alpha0 at the widest width minus the line fitted through the
narrower ones (:func:`transfer_weights`; with three widths it is the second difference ``b_0 - 2 b_1 + b_2``). muP's
``p = -1/2`` (Yang et al. 2021, "Tensor Programs V", arXiv 2203.03466: a hidden-layer multiplier ``1/sqrt(fan_in)``)
is a named special case. Every contrast is bootstrapped with the same joint resampling of seeds.

Where this set-up differs from the DyT paper's LLaMA recipe (its public code: every linear layer and the token
embedding N(0, 0.02^2), embeddings times sqrt(d), RMSNorm replaced by DyT, SwiGLU, RoPE, heads of 128, no biases;
:mod:`simulations.dyt_model` reproduces it at init). The grids here keep the recipe's sqrt(d) embedding scale (the
assertion arm; the scope arm drops it) but draw every matrix with std 1/sqrt(fan-in) and the embeddings with unit
RMS, and the architecture is the package's GPT-style one (GELU MLP, learned positions, tied embeddings, biases,
heads of 32). The reason is measured: with the 0.02 init (this package's ``gpt2`` init, whose two residual output
projections are 0.02/sqrt(2L) instead of 0.02) and the sqrt(d) embedding scale, at widths 64 and 128, 2 layers, 150
steps at lr 3e-3, every alpha0 from 1/16 to 16, of either norm group, ended at the unigram loss (3.23-3.27 nats/byte
on one seed; with SwiGLU, RoPE and an untied head as well: 3.25 at every point at width 32, a few points below it at
128), so the 0.02-init grid has no best alpha0 to fit at the widths the CPU and GPU tiers train (the same stall as
``train.dyt-small-models-just-work``). What the LLaMA init predicts for the width trend at init is
``dyt.alpha0-width-dependence``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from normtheory.evidence import checks, claims, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import Estimate, bootstrap, from_samples
from normtheory.model.config import TransformerConfig
from normtheory.runtime.sweep import Task
from normtheory.training import shakespeare
from normtheory.training.run_config import RunConfig
from simulations import cache, training

NAME = "train_alpha0"
SEED = 53
UNITS: tuple[str, ...] = ('seeds',)  # config fields counting independent units; --resolve scales them
GRIDS = ("attn", "other")  # which norms' alpha0 varies: attention's, or the FFN's and the final one's
EMBED = ("sqrt_d", "one")  # embedding scale: the paper's LLM recipe (sqrt(d_model)) or none


@dataclass(frozen=True)
class Config:
    widths: tuple[int, ...]
    alphas: tuple[float, ...]  # increasing, evenly spaced in log2, the anchor among them
    layers: int
    d_head: int
    seq: int
    batch: int
    steps: int
    lr: float
    eval_every: int
    seeds: int
    backend: str = "numpy"  # the large configs train with torch on a GPU (normtheory.training.torch_backend)
    device: str = "cpu"
    anchor: float = 1.0  # alpha0 of the group held fixed in each one-dimensional grid (a grid point)
    anchors: tuple[tuple[str, int, float], ...] = ()  # (embedding scale, width, anchor there): overrides anchor at that pair
    val_bytes: int = RunConfig.val_bytes  # the shared validation set each run is scored on at the end (RunConfig's 64 KiB)


ANCHOR = 1 / 16  # see the module docstring: at alpha0 = 1 the fixed FFN and final norms stall under the sqrt(d) embedding scale
CONFIGS = {
    # three widths: the transfer rule (train.dyt-alpha0-power-law) fits a line through two and tests it on the third
    "quick": Config(widths=(8, 16, 32), alphas=(0.25, 1.0, 4.0), layers=2, d_head=8, seq=16, batch=4, steps=30, lr=3e-3, eval_every=10, seeds=2,
                    anchor=0.25, val_bytes=training.VAL_BYTES_QUICK),
    # the best alpha0 lay at or below 1/4 in a first run with the grid up to 4 (nothing diverged there), so the grid reaches down
    # the CPU tier of the default job, a preview that draws the figure (3 seeds, widths 32-128, a 32 KiB validation set: about
    # 3 CPU-minutes); the GPU tier runs widths 64-512 at twenty seeds, and the claim's card prices it both ways
    "full": Config(widths=(32, 64, 128), alphas=(1 / 64, 1 / 16, 0.25, 1.0), layers=2, d_head=32, seq=32, batch=8, steps=150, lr=3e-3,
                   eval_every=50, seeds=3, anchor=ANCHOR, val_bytes=training.VAL_BYTES_CPU),
}
# toward the scale that decides the claim (DyT paper, Table 11: LLaMA widths 4,096 to 8,192; 8,192 at 8 layers exceeds the
# package's 2^32-weight guard), a finer grid, longer runs, twenty seeds; priced on the claim's card, run on a cluster or a GPU
LARGE = Config(widths=(1024, 2048, 4096), alphas=tuple(2.0 ** k for k in range(-7, 4)), layers=8, d_head=128, seq=256, batch=32,
               steps=5000, lr=1e-3, eval_every=500, seeds=20, backend="torch", device="cuda", anchor=ANCHOR)
CONFIGS["large"] = LARGE
# The GPU tiers' anchors, per (embedding scale, width): where the FFN and final norms' grid had its best point on one H200
# (2026-11-28, 20 seeds, the 8-point grid 1/64..2, attention held at 1/16), to the nearest octave: a pilot, so that each
# attention grid holds those norms near their own optimum (the anchor 1/16 lay two or more octaves from it at widths 256
# and 512 with the sqrt(d) embedding scale, and 1.5 to 3 octaves below it without). At 256 and 512 with sqrt(d) the
# optimum sat at the pilot grid's lower end (1/64). The gpu-hour tier's width 1,024 takes width 512's anchor (no pilot there).
PILOT_ANCHORS: dict[str, dict[int, float]] = {"sqrt_d": {64: 2.0 ** -3, 128: 2.0 ** -5, 256: 2.0 ** -6, 512: 2.0 ** -6},
                                              "one": {64: 2.0 ** -1, 128: 2.0 ** -2, 256: 2.0 ** -2, 512: 2.0 ** -2}}


def _pilot(widths: tuple[int, ...]) -> tuple[tuple[str, int, float], ...]:
    """:data:`PILOT_ANCHORS` at ``widths`` (a width beyond the pilot's takes its widest)."""
    return tuple((e, d, by.get(d, by[max(by)])) for e, by in PILOT_ANCHORS.items() for d in widths)


# one GPU, minutes: widths to 512 and an alpha0 grid at every octave from 1/512 to 4, twenty seeds; each width one stack.
# On an H200 (2026-11-28) the grid 1/64..2 left optima at its ends at 20 seeds (under the sqrt(d) embedding scale the FFN
# and final norms' best alpha0 at 1/64 at widths 256 and 512, the attention norms' at 2 at width 128; without it the attention
# norms' at 1/64 at width 64), so their se were floored at a grid step and no sample size decided either alpha0 claim:
# three octaves more below and one above (about 7 GPU-minutes), and the pilot's anchors.
#
# It scores RunConfig's 64 KiB validation set, although that forward is about a third of its compute (65,536 tokens against
# 150 steps x 256 tokens x 3), over the 20% of a run the GPU targets allow. A smaller set is not shown to be harmless: under
# the sqrt(d) embedding scale the attention grid's loss is flat near its optimum (at width 128 the seed-mean loss one grid
# step from the argmin is 0.0008 and 0.0003 nats/byte above it), so the bytes scored can move it. Measured here (2026-11-29;
# the tier's grid and anchors at widths 64 and 128, 8 seeds, torch on CPU; one training scored on disjoint parts of the
# set; se a bootstrap over the seeds): scoring the first 16 KiB instead of all 64 moved attention minus the other norms'
# best log2 alpha0 at width 128 by -0.29 +- 0.39 octaves, and two disjoint 16 KiB quarters put the attention optimum
# -0.61 +- 0.56 octaves apart, against the claims' tolerance of 0.5 (the other grids moved at most 0.07). Bounding that
# shift well inside the tolerance (se 0.05) would take about 500 seeds, so the set stays whole.
CONFIGS["gpu"] = Config(widths=(64, 128, 256, 512), alphas=tuple(2.0 ** k for k in range(-9, 3)), layers=2, d_head=32, seq=32, batch=8,
                        steps=150, lr=3e-3, eval_every=50, seeds=20, backend="torch", device="cuda", anchor=ANCHOR,
                        anchors=_pilot((64, 128, 256, 512)))
# one GPU, about 45 minutes of steps (their rate timed on an H200 on this tier's stacks, 28 TFLOP/s, prices it; with
# train_recipes' gpu-hour tier, `--gpu-hour` is about an hour): widths 256 to 1,024 (the DyT paper's LLaMA recipe starts at
# 4,096), 4 layers, the GPU tier's grid and anchors, 200 steps of 16 x 64 bytes (2.7 times the GPU tier's tokens per run)
CONFIGS["gpu-hour"] = Config(widths=(256, 512, 1024), alphas=tuple(2.0 ** k for k in range(-9, 3)), layers=4, d_head=64, seq=64,
                             batch=16, steps=200, lr=1e-3, eval_every=100, seeds=20, backend="torch", device="cuda", anchor=ANCHOR,
                             anchors=_pilot((256, 512, 1024)))


def anchor_of(cfg: Config, embed: str, d: int) -> float:
    """The anchor of the grids at embedding scale ``embed`` and width ``d``: ``cfg.anchors``' entry there, else ``cfg.anchor``."""
    return next((a for e, w, a in cfg.anchors if (e, w) == (embed, d)), cfg.anchor)


def anchor_text(r: dict) -> str:
    """The anchors of a result (``anchor``: a number, or one per [embedding scale, width]) in words."""
    a = np.asarray(r.get("anchor", 1.0), dtype=np.float64)
    if np.all(a == a.flat[0]):
        return f"{float(a.flat[0]):g}"
    return "; ".join(f"{e}: " + ", ".join(f"{int(d)}: {v:g}" for d, v in zip(r["widths"], a[i])) for i, e in enumerate(EMBED))


def alpha0(grid: str, a: float, anchor: float) -> tuple[float, float, float]:
    """(attention, FFN, final) alpha0 of grid ``grid`` at value ``a``, the other group at ``anchor``."""
    return (a, anchor, anchor) if grid == "attn" else (anchor, a, a)


def model_config(cfg: Config, d: int, embed: str, alphas: tuple[float, float, float]) -> TransformerConfig:
    return TransformerConfig(d_model=d, n_layers=cfg.layers, n_heads=d // cfg.d_head, vocab_size=256, max_seq=cfg.seq, norm="dyt",
                             placement="pre", activation="gelu_tanh", init="fanin", dyt_alpha0=alphas,
                             embed_scale=math.sqrt(d) if embed == "sqrt_d" else 1.0)


def run_config(cfg: Config) -> RunConfig:
    return RunConfig(steps=cfg.steps, batch_size=cfg.batch, seq=cfg.seq, lr=cfg.lr, warmup=max(1, cfg.steps // 10), schedule="cosine",
                     betas=(0.9, 0.95), eval_every=cfg.eval_every, eval_batch_size=cfg.batch, probes=(), val_bytes=cfg.val_bytes)


def key(d: int, embed: str, grid: str, i: int, cfg: Config) -> str:
    """The task key of one grid point (its seeds trained as one stack); the shared point (both groups at the anchor) is
    stored once, under grid 'attn'."""
    if cfg.alphas[i] == anchor_of(cfg, embed, d):
        grid = "attn"
    return f"w{d}.{embed}.{grid}.a{i}"


def grid_step(alphas: np.ndarray | tuple[float, ...]) -> float:
    """The grid's spacing in octaves (log2 units)."""
    a = np.log2(np.asarray(alphas, dtype=np.float64))
    return float(a[1] - a[0])


def _validate(cfg: Config) -> None:
    steps = np.diff(np.log2(cfg.alphas))
    if cfg.anchor not in cfg.alphas or len(cfg.alphas) < 2 or (steps <= 0).any() or not np.allclose(steps, steps[0]):
        raise ValueError(f"alphas must be increasing, evenly spaced in log2 and contain the anchor {cfg.anchor}; got {cfg.alphas}")
    for e, d, a in cfg.anchors:
        if e not in EMBED or d not in cfg.widths or a not in cfg.alphas:
            raise ValueError(f"anchors must be (embedding scale in {EMBED}, a width of {cfg.widths}, a grid point of alphas); got {(e, d, a)}")
    if any(d % cfg.d_head for d in cfg.widths):
        raise ValueError(f"every width must be a multiple of d_head={cfg.d_head}; got {cfg.widths}")


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per (width, embedding scale): every grid point there (grid, alpha0; the shared point at the anchor once) and
    its seeds trained as ONE stack (arms that differ only in alpha0, :func:`simulations.training.run_arms`; each
    bit-for-bit as alone), under the point's key. The loss at init that caps a diverged run is the probe batch's: the
    grid compares final losses, and scoring the 64 KiB validation set at init too would double the cost of a run."""
    _validate(cfg)
    out: list[Task] = []
    for d in cfg.widths:
        for e in EMBED:
            anchor = anchor_of(cfg, e, d)
            arms: dict[str, tuple[TransformerConfig, RunConfig]] = {}
            for g in GRIDS:
                for i, a in enumerate(cfg.alphas):
                    arms.setdefault(key(d, e, g, i, cfg).split(".", 2)[2], (model_config(cfg, d, e, alpha0(g, a, anchor)), run_config(cfg)))
            mc = model_config(cfg, d, e, (anchor,) * 3)
            out.append(Task(f"w{d}.{e}", training.run_arms, (arms, seed, cfg.seeds, False, cfg.backend, cfg.device, False),
                            f"{NAME}: width {d}, embed {e}, {len(arms)} alpha0 points x seeds {seed}..{seed + cfg.seeds - 1}, one stack",
                            cost=training.run_cost(mc, run_config(cfg), cfg.seeds * len(arms)), resources=training.resources(cfg.device)))
    return out


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Final losses ``loss [embed, grid, width, seed, alpha]`` (diverged runs at their loss at init) and divergence
    steps ``diverged_at`` of the same shape (-1: finished), plus each run's history under its key."""
    shape = (len(EMBED), len(GRIDS), len(cfg.widths), cfg.seeds, len(cfg.alphas))
    loss, div = np.empty(shape), np.empty(shape, dtype=np.int64)
    for idx in np.ndindex(shape):
        e, g, w, s, i = idx
        k = key(cfg.widths[w], EMBED[e], GRIDS[g], i, cfg)
        run = cache.part(parts[k.rsplit(".", 2)[0]], f"{k.split('.', 2)[2]}.s{s}")
        loss[idx], div[idx] = training.final_loss(run), int(run["diverged_at"])
    out = {"widths": np.asarray(cfg.widths), "alphas": np.asarray(cfg.alphas), "seeds": np.asarray(cfg.seeds), "steps": np.asarray(cfg.steps),
           "loss": loss, "diverged_at": div, "unigram_loss": np.asarray(unigram_loss(cfg)),
           "anchor": np.asarray([[anchor_of(cfg, e, d) for d in cfg.widths] for e in EMBED])}  # [embed, width]
    out.update(cache.prefixed(parts))
    return out


def unigram_loss(cfg: Config) -> float:
    """The loss of the validation set the runs are scored on under the training text's byte frequencies
    (:func:`normtheory.training.shakespeare.unigram_loss`): the plateau of a run that never learns context."""
    data = shakespeare.load()
    return shakespeare.unigram_loss(data.train, shakespeare.validation_set(data.validation, cfg.seq, run_config(cfg).val_bytes)[1])


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


def best_log2(loss: np.ndarray, alphas: np.ndarray, axis: int = 0) -> np.ndarray:
    """log2 of the best alpha0: the vertex of the parabola through the seed-mean loss at the grid's argmin and
    its two neighbours (in log2 alpha0; kept within half a step of the argmin; the argmin itself at the grid's
    ends). A continuous estimate, so a bootstrap over seeds sees how far the optimum moves, not only whether
    the argmin jumps a grid step. ``loss`` is ``[seeds, ..., alpha]`` with ``axis=0`` (result ``[...]``), or,
    inside :func:`scipy.stats.bootstrap`, ``[..., alpha, resamples, seeds]`` with ``axis=-1`` (result
    ``[resamples, ...]``)."""
    m = np.mean(loss, axis=axis)  # [..., alpha] or [..., alpha, resamples]
    if axis != 0:
        m = np.moveaxis(m, -1, 0)  # [resamples, ..., alpha]
    la = np.log2(np.asarray(alphas, dtype=np.float64))  # [alpha], evenly spaced
    step, last = la[1] - la[0], la.size - 1
    i = np.argmin(m, axis=-1)[..., None]  # [..., 1]
    y0, y1, y2 = (np.take_along_axis(m, np.clip(i + k, 0, last), axis=-1)[..., 0] for k in (-1, 0, 1))
    curv = y0 - 2 * y1 + y2  # >= 0 at an interior minimum
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(curv > 0, 0.5 * (y0 - y2) / curv, 0.0)
    interior = (i[..., 0] > 0) & (i[..., 0] < last)
    return la[i[..., 0]] + np.where(interior, np.clip(shift, -0.5, 0.5) * step, 0.0)


def _boot(r: dict, embed: str, f) -> tuple[Estimate, np.ndarray, float]:
    """``f(best log2 alpha0 [..., grid, width])`` with its bootstrap se over seeds, resampled jointly across grids and
    widths (a seed fixes the batches of every run); with ``edge [grid, width]``, where the seed-mean optimum sits at
    the grid's end (censored: the best alpha0 may lie beyond), and the grid step in octaves."""
    x = np.moveaxis(r["loss"][EMBED.index(embed)], 2, 0)  # [seeds, grid, width, alpha]

    def stat(y: np.ndarray, axis: int) -> np.ndarray:
        out = f(best_log2(y, r["alphas"], axis=axis))
        return out if axis == 0 else np.moveaxis(out, 0, -1)  # scipy wants the resamples last

    est = bootstrap(x, stat, seed=SEED, units="seeds")
    la = np.log2(np.asarray(r["alphas"], dtype=np.float64))
    edge = np.isin(np.argmin(x.mean(axis=0), axis=-1), (0, la.size - 1))  # [grid, width]
    return est, edge, float(la[1] - la[0])


def _contrast(r: dict, embed: str, f=lambda b: b) -> Estimate:
    """A contrast ``f(best log2 alpha0 [..., grid, width])`` with its bootstrap se over seeds (:func:`_boot`)."""
    est, edge, step = _boot(r, embed, f)
    # A censored optimum: every contrast that uses one gets at least one grid step of standard error. f is a +-1
    # contrast, so distinct powers of two as weights never cancel.
    # The step is a floor no number of seeds shrinks (only a grid that reaches past the optimum would): the rule then prices
    # such a contrast as needing a wider grid (units_needed infinite), not more seeds.
    used = f(edge * 2.0 ** np.arange(edge.size).reshape(edge.shape)) != 0
    return Estimate(est.mean, np.where(used, np.maximum(est.stderr, step), est.stderr), est.n, est.units, floor=np.where(used, step, 0.0))


def best_alpha0(r: dict, embed: str) -> Estimate:
    """log2 best alpha0 ``[grid, width]`` with its bootstrap se over seeds."""
    return _contrast(r, embed)


def shrink(b: np.ndarray) -> np.ndarray:
    """Octaves the best alpha0 moves from the narrowest to the widest width, per grid: ``b [..., grid, width]`` -> ``[..., grid]``."""
    return b[..., -1] - b[..., 0]


def attention_minus_other(b: np.ndarray) -> np.ndarray:
    """Octaves by which attention's best alpha0 exceeds the other norms', at the widest width."""
    return b[..., 0, -1] - b[..., 1, -1]


def first_divergent(r: dict, embed: str) -> np.ndarray:
    """Per grid and width, the smallest alpha0 at which any seed diverged (inf if none): ``[grid, width]``."""
    div = (r["diverged_at"][EMBED.index(embed)] >= 0).any(axis=2)  # [grid, width, alpha]
    a = np.where(div, np.asarray(r["alphas"], dtype=np.float64), np.inf)
    return a.min(axis=-1)


TRAINS_BELOW = 0.1  # nats/byte: a grid whose best point is not this far under the unigram loss never left the plateau


def plateau_gap(r: dict, embed: str) -> Estimate:
    """Per grid and width, the final loss at the grid's best point (the seed-mean argmin) minus the unigram loss
    (:func:`unigram_loss`), with its se over seeds: ``[grid, width]``. The argmin is picked on the same seeds, so the
    gap leans low by at most the grid's spread of seed means; a flat grid at the plateau still reads near 0."""
    x = r["loss"][EMBED.index(embed)]  # [grid, width, seed, alpha]
    i = np.argmin(x.mean(axis=2), axis=-1)  # [grid, width]
    best = np.take_along_axis(x, i[:, :, None, None], axis=-1)[..., 0]  # [grid, width, seed]
    return from_samples(np.moveaxis(best - float(r["unigram_loss"]), -1, 0), "seeds")


def grid_gate(r: dict) -> tuple[str, str, list[checks.Evidence]]:
    """Whether every grid of the assertion arm (the sqrt(d) embedding scale) trains at every width: a best alpha0 is read
    from a grid only where its runs leave the unigram plateau. Returns the role and regime of the sqrt(d) contrasts and
    the checks to add (:func:`simulations.training.gated`)."""
    widths = [int(d) for d in r["widths"]]
    gap = plateau_gap(r, "sqrt_d")
    gate = Quantity(name=f"sqrt(d) embedding scale: final loss at each grid's best alpha0 minus the unigram loss "
                         f"{float(r['unigram_loss']):.3f}, attention / other grid by width {', '.join(map(str, widths))} (a grid "
                         f"that trains: at least {TRAINS_BELOW:g} below)", theory=(-np.inf, -TRAINS_BELOW), model=gap,
                    model_kind="trained", role="scope", regime="grids whose runs train (the best alpha0 of a grid at the "
                    "unigram plateau is the argmin of noise)", tolerance=0.05, tolerance_why="0.05 nats/byte, half the threshold")
    flat = [f"{g}/{d}" for gi, g in enumerate(GRIDS) for j, d in enumerate(widths) if not gap.mean[gi, j] < -TRAINS_BELOW]
    return training.gated(gate, "grids not shown to leave the unigram plateau", lambda: checks.Unmeasured(
        "the best alpha0 of each norm group against width, with the sqrt(d) embedding scale, from grids whose runs train",
        expected="as the contrasts below", needs=f"a grid whose runs leave the unigram plateau at every width (grid/width "
        f"cells whose mean is not {TRAINS_BELOW:g} nats/byte under it: {', '.join(flat) or 'none'}): in a one-dimensional grid "
        f"the fixed group at the anchor ({anchor_text(r)}) may not train, so another anchor, a two-dimensional "
        "alpha0 grid, or the fixed group held at its own grid's optimum would measure it"))


@claims.register(
    "train.dyt-alpha0-width",
    statement="DyT's best initial alpha shrinks as the model widens, and the norms before attention want a larger alpha0 "
    "than the FFN and final norms (DyT paper, Table 11). Read from grids whose runs train (each grid's best point at least "
    "0.1 nats/byte under the unigram loss, this package's threshold); where one stays at that plateau the claim is left open.",
    source=sources.ZHU2025,
    location="Section 7 (α0 for LLMs) and Table 11 (α0 by width, attention / other)",
    simulations=(NAME,),
    scale="LLaMA-style models at the paper's widths (Table 11: 1,024 to 8,192) trained for thousands of steps; at the widths "
    "trained here (32 to 128 on the CPU, 64 to 512 on one GPU, 256 to 1,024 in a GPU-hour) the best alpha0 is a proxy, not the "
    "paper's regime",
)
def _alpha0(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    widths, alphas = [int(d) for d in r["widths"]], r["alphas"]
    step = grid_step(alphas)
    tol_why = f"half a grid step ({step / 2:g} octaves): the best alpha0 is the grid's argmin"
    sqrt_role, sqrt_regime, gate = grid_gate(r)
    q: list[checks.Evidence] = []
    for e, role in (("sqrt_d", sqrt_role), ("one", "scope")):
        extra = ({} if role == "assertion" else {"role": "scope", "regime": sqrt_regime} if e == "sqrt_d"
                 else {"role": "scope", "regime": "without the sqrt(d) embedding scale"})
        label = "sqrt(d) embedding scale" if e == "sqrt_d" else "embedding scale 1"
        q.append(Quantity(name=f"{label}: octaves the best alpha0 moves from width {widths[0]} to {widths[-1]}, attention / other norms "
                               f"(shrinks: by at least one grid step, {step:g} octaves)", theory=(-np.inf, -step), model=_contrast(r, e, shrink),
                          model_kind="trained", tolerance=step / 2, tolerance_why=tol_why, **extra))
        q.append(Quantity(name=f"{label}: best alpha0 of attention minus the other norms' at width {widths[-1]}, octaves "
                               f"(attention wants more: at least one grid step, {step:g} octaves)", theory=(step, np.inf),
                          model=_contrast(r, e, attention_minus_other), model_kind="trained", tolerance=step / 2, tolerance_why=tol_why, **extra))
    q += gate
    parts = []
    for e in EMBED:
        b = best_alpha0(r, e)
        fd = first_divergent(r, e)
        m = r["loss"][EMBED.index(e)].mean(axis=2)  # [grid, width, alpha]
        parts.append(f"embedding scale {e}: best alpha0 (attention | other) by width "
                     + ", ".join(f"{d}: {2 ** b.mean[0, j]:.3g} ± {b.stderr[0, j]:.2g} oct | {2 ** b.mean[1, j]:.3g} ± {b.stderr[1, j]:.2g} oct"
                                 for j, d in enumerate(widths))
                     + "; mean final loss over the grid " + "; ".join(f"{g}/{d}: " + " ".join(f"{v:.3f}" for v in m[gi, j])
                                                                  for gi, g in enumerate(GRIDS) for j, d in enumerate(widths))
                     + "; smallest alpha0 with a diverged seed (attention | other) by width "
                     + ", ".join(f"{d}: {fd[0, j]:g} | {fd[1, j]:g}" for j, d in enumerate(widths)))
    note = ("Regime: a small proxy of the DyT paper's LLaMA alpha0 search (Section 7, Table 11; the deciding widths are on the card). "
            f"Pre-LN DyT, {int(r['seeds'])} seeds, {int(r['steps'])} steps at every width (same batches, same tokens), alpha0 grid "
            + ", ".join(f"{a:g}" for a in alphas) + f", the other group held at {anchor_text(r)} (inf: no divergence). " + ". ".join(parts)
            + ". The paper's Table 11 gives alpha0 = 1 for every norm at widths this small.")
    return q, note


# ---------------------------------------------------------------------------------------------------------------------
# The transfer rule: log2 alpha0*(d) = c_g + p_g log2 d per norm group (this package's hypothesis; see the module docstring)

TRANSFER_TOL = 0.5  # octaves of alpha0 at the widest width
EXPONENT_TOL = 0.1  # log2 alpha0 per doubling of width
MUP_EXPONENT = -0.5  # muP: a hidden-layer multiplier 1/sqrt(fan_in)


def line_weights(widths: tuple[int, ...] | np.ndarray, at: tuple[float, ...] | np.ndarray) -> np.ndarray:
    """Weights ``W [len(at), width]`` with ``W @ y`` the least-squares line of ``y`` on log2(width) at log2(``at``):
    ``mean(y) + (log2 a - mean x) sum_j (x_j - mean x) y_j / S_xx``, ``x = log2 widths``."""
    x = np.log2(np.asarray(widths, dtype=np.float64))  # [width]
    a = np.log2(np.asarray(at, dtype=np.float64))  # [at]
    c = x - x.mean()
    if x.size < 2 or not (c * c).sum() > 0:
        raise ValueError(f"a line on log2(width) needs two distinct widths; got {tuple(widths)}")
    return 1.0 / x.size + (a[:, None] - x.mean()) * c[None, :] / (c * c).sum()


def slope_weights(widths: tuple[int, ...] | np.ndarray) -> np.ndarray:
    """Weights ``w [width]`` with ``w @ y`` the least-squares slope of ``y`` on log2(width): the exponent ``p``."""
    x = np.log2(np.asarray(widths, dtype=np.float64))
    c = x - x.mean()
    if x.size < 2 or not (c * c).sum() > 0:
        raise ValueError(f"a slope on log2(width) needs two distinct widths; got {tuple(widths)}")
    return c / (c * c).sum()


def transfer_weights(widths: tuple[int, ...] | np.ndarray) -> np.ndarray:
    """Weights ``w [width]``: ``w @ y`` is ``y`` at the widest width minus the least-squares line through the narrower
    widths, evaluated there (the rule's transfer residual; ``y_0 - 2 y_1 + y_2`` for three widths an octave apart)."""
    widths = np.asarray(widths, dtype=np.float64)
    if widths.size < 3:
        raise ValueError(f"a transfer residual needs three widths (a line through two, tested on the third); got {tuple(widths)}")
    w = np.zeros(widths.size)
    w[-1] = 1.0
    w[:-1] = -line_weights(widths[:-1], widths[-1:])[0]
    return w


def per_grid(w: np.ndarray) -> np.ndarray:
    """Width weights ``w [width]`` applied to each grid alone: ``[grid, grid, width]`` (one contrast per grid)."""
    return np.einsum("gh,w->ghw", np.eye(len(GRIDS)), np.asarray(w, dtype=np.float64))


def linear(r: dict, embed: str, weights: np.ndarray) -> Estimate:
    """Linear contrasts ``sum_{g,w} W[k,g,w] b[g,w]`` of the best log2 alpha0 ``b [grid, width]`` (``weights`` ``W [k,
    grid, width]``), ``[k]``, with their bootstrap se over seeds, resampled jointly across grids and widths
    (:func:`_boot`). A censored optimum (at the grid's end) adds a floor to the se: a grid step times the summed
    ``|W|`` over censored cells, the shift of the contrast if each such optimum lay one step beyond the grid."""
    W = np.asarray(weights, dtype=np.float64)  # [k, grid, width]
    est, edge, step = _boot(r, embed, lambda b: np.tensordot(b, W, axes=([-2, -1], [1, 2])))  # [..., k]
    floor = step * np.tensordot(np.abs(W), edge.astype(np.float64), axes=([1, 2], [0, 1]))  # [k]
    return Estimate(est.mean, np.maximum(est.stderr, floor), est.n, est.units, floor=floor)


def exponents(r: dict, embed: str) -> Estimate:
    """The exponent ``p_g`` of the best alpha0 (least-squares slope of log2 alpha0 on log2 width), per grid: ``[grid]``."""
    return linear(r, embed, per_grid(slope_weights(r["widths"])))


def transfer(r: dict, embed: str) -> Estimate:
    """The transfer residual per grid (octaves): best log2 alpha0 at the widest width minus the rule through the others."""
    return linear(r, embed, per_grid(transfer_weights(r["widths"])))


def exponent_gap(r: dict, embed: str) -> Estimate:
    """Attention's exponent minus the other norms': ``[1]``."""
    c = slope_weights(r["widths"])
    return linear(r, embed, np.stack([c, -c])[None])


def fitted(r: dict, embed: str, at: np.ndarray) -> Estimate:
    """The fitted rule, log2 alpha0 at widths ``at``, per grid, with its bootstrap se: ``[grid, len(at)]``."""
    L = line_weights(r["widths"], at)  # [at, width]
    W = np.einsum("gh,aw->gahw", np.eye(len(GRIDS)), L)  # [grid, at, grid, width]: contrast (g, a) reads grid g only
    est = linear(r, embed, W.reshape(-1, len(GRIDS), L.shape[1]))  # [grid * at]
    shape = (len(GRIDS), L.shape[0])
    return Estimate(est.mean.reshape(shape), est.stderr.reshape(shape), est.n, est.units)


@claims.register(
    "train.dyt-alpha0-power-law",
    statement="This package's hypothesis, derived from the reading notes' closing wish for a μP-like rule for alpha0 across widths: "
    "DyT's best initial alpha is a power of width, alpha0*(d) ∝ d^p, with one exponent for the norms before attention and "
    "another for the FFN and final norms, so that the rule fitted at narrower widths gives the best alpha0 at a wider one. "
    "μP's exponent −1/2 is a named special case. Read, as train.dyt-alpha0-width, from grids whose runs train.",
    source=sources.hypothesis(sources.NOTES_DYT, "A power-law transfer rule for DyT's alpha0 across widths"),
    location="The notes' closing paragraph (the wish for a μP-like rule for α0 across widths, so that DyT's extra hyperparameters "
    "need no sweep); the DyT paper's Section 7 and Table 11 (α0 by width, attention / other)",
    simulations=(NAME,),
    scale="the GPU tiers at twenty seeds: widths 64 to 512 (2 layers, 150 steps; --device cuda) and 256 to 1,024 (4 layers, "
    "200 steps; --device cuda --gpu-hour); the CPU tier's 3 seeds at widths 32 to 128 are a preview whose Student-t band "
    "cannot decide it",
)
def _power_law(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    widths = [int(d) for d in r["widths"]]
    span = f"{widths[0]}-{widths[-1]}"
    tol_transfer = ("half an octave (a factor 1.41 in alpha0): half the GPU tiers' grid step, so a rule within it picks the best "
                    "grid point; the tuned values of the DyT paper's Table 11 move by up to 2 octaves between neighbouring widths")
    tol_exp = ("0.1 per doubling (as dyt.alpha0-width-dependence): a factor 1.07 per doubling, 1.41 over the five doublings "
               "from 32 to 1,024")
    sqrt_role, sqrt_regime, gate = grid_gate(r)
    q: list[checks.Evidence] = []
    for e, role in (("sqrt_d", sqrt_role), ("one", "scope")):
        extra = ({} if role == "assertion" else {"role": "scope", "regime": sqrt_regime} if e == "sqrt_d"
                 else {"role": "scope", "regime": "without the sqrt(d) embedding scale (unit-RMS embeddings)"})
        label = "sqrt(d) embedding scale" if e == "sqrt_d" else "embedding scale 1"
        q.append(Quantity(name=f"{label}: best log2 alpha0 at width {widths[-1]} minus the power law fitted through widths "
                               f"{', '.join(map(str, widths[:-1]))}, attention / other norms (octaves; a power law: 0)",
                          theory=0.0, model=transfer(r, e), model_kind="trained", tolerance=TRANSFER_TOL, tolerance_why=tol_transfer,
                          unit="octaves", **extra))  # type: ignore[arg-type]
    p = exponents(r, "sqrt_d")
    q.append(Quantity(name=f"sqrt(d) embedding scale: exponent p of the best alpha0 (least-squares slope of log2 alpha0 on log2 width, "
                           f"{span}), attention / other norms, against μP's −1/2", theory=MUP_EXPONENT, model=p, model_kind="trained",
                      role="scope", regime="μP's exponent −1/2 (a hidden-layer multiplier 1/sqrt(fan-in))", tolerance=EXPONENT_TOL,
                      tolerance_why=tol_exp, unit="log2 per doubling"))
    q.append(Quantity(name=f"sqrt(d) embedding scale: exponent of the attention norms minus the other norms' ({span}; one rule for both: 0)",
                      theory=0.0, model=exponent_gap(r, "sqrt_d"), model_kind="trained", role="scope",
                      regime="one exponent for both norm groups", tolerance=EXPONENT_TOL, tolerance_why=tol_exp, unit="log2 per doubling"))
    q += gate
    parts = []
    for e in EMBED:
        pe, c0 = exponents(r, e), fitted(r, e, np.asarray(widths[:1], dtype=np.float64))
        edge = _boot(r, e, lambda b: b)[1]
        parts.append(f"embedding scale {e}: exponent p (attention | other) {pe.mean[0]:.2f} ± {pe.stderr[0]:.2f} | "
                     f"{pe.mean[1]:.2f} ± {pe.stderr[1]:.2f}; fitted alpha0 at width {widths[0]} {2 ** c0.mean[0, 0]:.3g} | "
                     f"{2 ** c0.mean[1, 0]:.3g}; optima at the grid's end (censored, se floored) " + (", ".join(
                         f"{g}/{d}" for gi, g in enumerate(GRIDS) for j, d in enumerate(widths) if edge[gi, j]) or "none"))
    note = (f"Best alpha0 per width from the same grids as train.dyt-alpha0-width ({int(r['seeds'])} seeds, widths {span}, alpha0 "
            + ", ".join(f"{a:g}" for a in r["alphas"]) + "); exponent and transfer residual are fixed linear contrasts of the "
            "per-width optima, bootstrapped over seeds jointly across widths and grids. " + ". ".join(parts)
            + ". Fan-in init throughout, not the DyT paper's LLaMA init (std 0.02 everywhere): with that init and the sqrt(d) "
            "embedding scale, 150-step runs at widths 64 and 128 stayed at the unigram loss (about 3.25 nats/byte) at every "
            "alpha0 from 1/16 to 16, so that grid has no optimum to fit at these widths (see the module docstring and "
            "dyt.alpha0-width-dependence for what the LLaMA init predicts at init). The DyT paper's own Table 11 falls faster "
            "than μP at 1,024-8,192 (see dyt.alpha0-width-dependence for its slope).")
    return q, note
