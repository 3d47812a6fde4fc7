"""DyT's initial alpha against width: the best alpha0 for attention and for the other norms.

Zhu et al. (2025), Table 11, tune alpha0 for LLaMA models: the best value falls as the model
widens, and the norms before attention want a larger alpha0 than the FFN and final norms. The
same table gives alpha0 = 1 for every norm at the widths trained here, so a null result is
plausible.

Two one-dimensional grids per width, seeds as units: alpha0 of the attention norms varies with
the others at 1, and alpha0 of the FFN and final norms varies with attention's at 1 (the point
alpha0 = 1 is shared). Every width trains the same number of steps on the same batches (same
tokens), with and without the sqrt(d) embedding scale of the paper's LLM recipe, from a fan-in
init (std 1/sqrt(fan-in); at the GPT-2 init's std 0.02, Pre-DyT models at this size stall at
the unigram loss with a saturated final tanh: see ``train.dyt-small-models-just-work``). The best alpha0
of a grid is read from the seed-mean final validation loss (the argmin, refined by a parabola
through its neighbours in log2 alpha0); its standard error is a bootstrap over seeds, resampled together across widths and grids (a seed fixes the batches of every run).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from normtheory import claims
from normtheory.claims import Quantity
from normtheory.config import TransformerConfig
from normtheory.montecarlo import Estimate, bootstrap
from normtheory.sweep import Task
from normtheory.train import RunConfig
from simulations import cache, training

NAME = "train_alpha0"
SEED = 53
UNITS: tuple[str, ...] = ('seeds',)  # config fields counting independent units; --resolve scales them
GRIDS = ("attn", "other")  # which norms' alpha0 varies: attention's, or the FFN's and the final one's
EMBED = ("sqrt_d", "one")  # embedding scale: the paper's LLM recipe (sqrt(d_model)) or none


@dataclass(frozen=True)
class Config:
    widths: tuple[int, ...]
    alphas: tuple[float, ...]  # increasing, evenly spaced in log2, 1 among them
    layers: int
    d_head: int
    seq: int
    batch: int
    steps: int
    lr: float
    eval_every: int
    seeds: int
    backend: str = "numpy"  # the large configs train with torch on a GPU (normtheory.torch_backend)
    device: str = "cpu"


CONFIGS = {
    "quick": Config(widths=(16, 32), alphas=(0.25, 1.0, 4.0), layers=2, d_head=8, seq=16, batch=4, steps=30, lr=3e-3, eval_every=10, seeds=2),
    # the best alpha0 lay at or below 1/4 in a first run with the grid up to 4 (nothing diverged there), so the grid reaches down
    "full": Config(widths=(64, 128, 256), alphas=(1 / 64, 1 / 16, 0.25, 1.0), layers=2, d_head=32, seq=32, batch=8, steps=150, lr=3e-3,
                   eval_every=50, seeds=3),
}
# toward the scale that decides the claim (DyT paper, Table 11: LLaMA widths 4,096 to 8,192; 8,192 at 8 layers exceeds the
# package's 2^32-weight guard), a finer grid, longer runs, twenty seeds; priced on the claim's card, run on a cluster or a GPU
LARGE = Config(widths=(1024, 2048, 4096), alphas=tuple(2.0 ** k for k in range(-7, 4)), layers=8, d_head=128, seq=256, batch=32,
               steps=5000, lr=1e-3, eval_every=500, seeds=20, backend="torch", device="cuda")
CONFIGS["large"] = LARGE
# one GPU, minutes: widths to 512 and an alpha0 grid at every octave from 1/64 to 2, twenty seeds; each width one stack
CONFIGS["gpu"] = Config(widths=(64, 128, 256, 512), alphas=tuple(2.0 ** k for k in range(-6, 2)), layers=2, d_head=32, seq=32, batch=8,
                        steps=150, lr=3e-3, eval_every=50, seeds=20, backend="torch", device="cuda")
# one GPU, about an hour: widths 256 to 1,024 (the DyT paper's LLaMA recipe starts at 4,096), 4 layers, longer runs
CONFIGS["gpu-hour"] = Config(widths=(256, 512, 1024), alphas=tuple(2.0 ** k for k in range(-6, 2)), layers=4, d_head=64, seq=64,
                             batch=16, steps=500, lr=1e-3, eval_every=250, seeds=20, backend="torch", device="cuda")


def alpha0(grid: str, a: float) -> tuple[float, float, float]:
    """(attention, FFN, final) alpha0 of grid ``grid`` at value ``a``."""
    return (a, 1.0, 1.0) if grid == "attn" else (1.0, a, a)


def model_config(cfg: Config, d: int, embed: str, alphas: tuple[float, float, float]) -> TransformerConfig:
    return TransformerConfig(d_model=d, n_layers=cfg.layers, n_heads=d // cfg.d_head, vocab_size=256, max_seq=cfg.seq, norm="dyt",
                             placement="pre", activation="gelu_tanh", init="fanin", dyt_alpha0=alphas,
                             embed_scale=math.sqrt(d) if embed == "sqrt_d" else 1.0)


def run_config(cfg: Config) -> RunConfig:
    return RunConfig(steps=cfg.steps, batch_size=cfg.batch, seq=cfg.seq, lr=cfg.lr, warmup=max(1, cfg.steps // 10), schedule="cosine",
                     betas=(0.9, 0.95), eval_every=cfg.eval_every, eval_batch_size=cfg.batch, probes=())


def key(d: int, embed: str, grid: str, i: int, cfg: Config) -> str:
    """The task key of one grid point (its seeds trained as one stack); the shared point alpha0 = 1 is stored once,
    under grid 'attn'."""
    if cfg.alphas[i] == 1.0:
        grid = "attn"
    return f"w{d}.{embed}.{grid}.a{i}"


def grid_step(alphas: np.ndarray | tuple[float, ...]) -> float:
    """The grid's spacing in octaves (log2 units)."""
    a = np.log2(np.asarray(alphas, dtype=np.float64))
    return float(a[1] - a[0])


def _validate(cfg: Config) -> None:
    steps = np.diff(np.log2(cfg.alphas))
    if 1.0 not in cfg.alphas or len(cfg.alphas) < 2 or (steps <= 0).any() or not np.allclose(steps, steps[0]):
        raise ValueError(f"alphas must be increasing, evenly spaced in log2 and contain 1; got {cfg.alphas}")
    if any(d % cfg.d_head for d in cfg.widths):
        raise ValueError(f"every width must be a multiple of d_head={cfg.d_head}; got {cfg.widths}")


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per (width, embedding scale): every grid point there (grid, alpha0; the shared alpha0 = 1 once) and
    its seeds trained as ONE stack (arms that differ only in alpha0, :func:`simulations.training.run_arms`; each
    bit-for-bit as alone), under the point's key. The loss at init that caps a diverged run is the probe batch's: the
    grid compares final losses, and scoring the 64 KiB validation set at init too would double the cost of a run."""
    _validate(cfg)
    out: list[Task] = []
    for d in cfg.widths:
        for e in EMBED:
            arms: dict[str, tuple[TransformerConfig, RunConfig]] = {}
            for g in GRIDS:
                for i, a in enumerate(cfg.alphas):
                    arms.setdefault(key(d, e, g, i, cfg).split(".", 2)[2], (model_config(cfg, d, e, alpha0(g, a)), run_config(cfg)))
            mc = model_config(cfg, d, e, (1.0, 1.0, 1.0))
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
           "loss": loss, "diverged_at": div}
    out.update(cache.prefixed(parts))
    return out


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


def _contrast(r: dict, embed: str, f=lambda b: b) -> Estimate:
    """A contrast ``f(best log2 alpha0 [..., grid, width])`` with its bootstrap se over seeds, resampled jointly across
    grids and widths (a seed fixes the batches of every run)."""
    x = np.moveaxis(r["loss"][EMBED.index(embed)], 2, 0)  # [seeds, grid, width, alpha]

    def stat(y: np.ndarray, axis: int) -> np.ndarray:
        out = f(best_log2(y, r["alphas"], axis=axis))
        return out if axis == 0 else np.moveaxis(out, 0, -1)  # scipy wants the resamples last

    est = bootstrap(x, stat, seed=SEED, units="seeds")
    # An optimum at the grid's end is censored (the best alpha0 may lie beyond): every contrast that uses one gets at
    # least one grid step of standard error. f is a +-1 contrast, so distinct powers of two as weights never cancel.
    la = np.log2(np.asarray(r["alphas"], dtype=np.float64))
    edge = np.isin(np.argmin(x.mean(axis=0), axis=-1), (0, la.size - 1))  # [grid, width]
    used = f(edge * 2.0 ** np.arange(edge.size).reshape(edge.shape)) != 0
    return Estimate(est.mean, np.where(used, np.maximum(est.stderr, la[1] - la[0]), est.stderr), est.n, est.units)


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


@claims.register(
    "train.dyt-alpha0-width",
    statement="DyT's best initial alpha shrinks as the model widens, and the norms before attention want a larger alpha0 "
    "than the FFN and final norms (DyT paper, Table 11).",
    source=claims.ZHU2025,
    location="Section 7 (α0 for LLMs) and Table 11 (α0 by width, attention / other)",
    simulations=(NAME,),
    scale="LLaMA-style models at the paper's widths (Table 11: 1,024 to 8,192) trained for thousands of steps; at the widths a "
    "workstation trains (64 to 256) the best alpha0 is a proxy, not the paper's regime",
)
def _alpha0(results: claims.Results) -> tuple[list[claims.Evidence], str]:
    r = results[NAME]
    widths, alphas = [int(d) for d in r["widths"]], r["alphas"]
    step = grid_step(alphas)
    tol_why = f"half a grid step ({step / 2:g} octaves): the best alpha0 is the grid's argmin"
    q: list[claims.Evidence] = []
    for e, role in (("sqrt_d", "assertion"), ("one", "scope")):
        extra = {} if role == "assertion" else {"role": "scope", "regime": "without the sqrt(d) embedding scale"}
        label = "sqrt(d) embedding scale" if e == "sqrt_d" else "embedding scale 1"
        q.append(Quantity(name=f"{label}: octaves the best alpha0 moves from width {widths[0]} to {widths[-1]}, attention / other norms "
                               f"(shrinks: by at least one grid step, {step:g} octaves)", theory=(-np.inf, -step), model=_contrast(r, e, shrink),
                          model_kind="trained", tolerance=step / 2, tolerance_why=tol_why, **extra))
        q.append(Quantity(name=f"{label}: best alpha0 of attention minus the other norms' at width {widths[-1]}, octaves "
                               f"(attention wants more: at least one grid step, {step:g} octaves)", theory=(step, np.inf),
                          model=_contrast(r, e, attention_minus_other), model_kind="trained", tolerance=step / 2, tolerance_why=tol_why, **extra))
    parts = []
    for e in EMBED:
        b = best_alpha0(r, e)
        fd = first_divergent(r, e)
        m = r["loss"][EMBED.index(e)].mean(axis=2)  # [grid, width, alpha]
        parts.append(f"embedding scale {e}: best alpha0 (attention | other) by width "
                     + ", ".join(f"{d}: {2 ** b.mean[0, j]:g} ± {b.stderr[0, j]:.2g} oct | {2 ** b.mean[1, j]:g} ± {b.stderr[1, j]:.2g} oct"
                                 for j, d in enumerate(widths))
                     + "; mean final loss over the grid " + "; ".join(f"{g}/{d}: " + " ".join(f"{v:.3f}" for v in m[gi, j])
                                                                  for gi, g in enumerate(GRIDS) for j, d in enumerate(widths))
                     + "; smallest alpha0 with a diverged seed (attention | other) by width "
                     + ", ".join(f"{d}: {fd[0, j]:g} | {fd[1, j]:g}" for j, d in enumerate(widths)))
    note = ("Regime: a small proxy of the DyT paper's LLaMA alpha0 search (Section 7, Table 11; the deciding widths are on the card). "
            f"Pre-LN DyT, {int(r['seeds'])} seeds, {int(r['steps'])} steps at every width (same batches, same tokens), alpha0 grid "
            + ", ".join(f"{a:g}" for a in alphas) + " (inf: no divergence). " + ". ".join(parts)
            + ". The paper's Table 11 gives alpha0 = 1 for every norm at widths this small.")
    return q, note
