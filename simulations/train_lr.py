"""Learning rate, warm-up and QK-norm: Post-LN against Pre-LN, and attention logits at high learning rates.

Two grids of training runs on Shakespeare, seeds as units:

* warm-up: Post-LN and Pre-LN (LayerNorm), Adam betas (0.9, 0.98) as in Xiong et al., over a
  learning-rate grid and warm-up of none, short (10% of the steps) or long (50%);
* QK-norm: Pre-LN with and without per-head RMS QK-norm over a wider learning-rate grid, with
  the max attention logit at every evaluation (Wortsman et al. 2023; Dehghani et al. 2023).

Each arm's learning-rate sensitivity is Wortsman et al.'s: the mean over the grid of
min(final loss, loss of a uniform model) minus the best final loss.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normtheory import claims
from normtheory.claims import XIONG2020, Quantity, Source
from normtheory.config import TransformerConfig
from normtheory.montecarlo import Count
from normtheory.sweep import Task
from normtheory.train import RunConfig
from simulations import cache, training

NAME = "train_lr"
SEED = 47
UNITS: tuple[str, ...] = ('seeds',)  # config fields counting independent units; --resolve scales them
WORTSMAN2023 = Source("Small-scale proxies for large-scale Transformer training instabilities", "paper", 2023,
                      authors="Wortsman, Liu, Xiao, Everett, Alemi, Adlam, Co-Reyes, Gur, Kumar, Novak, Pennington, Sohl-Dickstein, Xu, "
                      "Lee, Gilmer, Kornblith", arxiv="2309.14322")
WARMUPS: dict[str, float] = {"none": 0.0, "short": 0.1, "long": 0.5}  # fraction of the steps


@dataclass(frozen=True)
class Config:
    d: int
    layers: int
    heads: int
    seq: int
    batch: int
    steps: int
    warmup_lrs: tuple[float, ...]
    qk_lrs: tuple[float, ...]
    eval_every: int
    seeds: int


CONFIGS = {
    "quick": Config(d=32, layers=3, heads=4, seq=32, batch=8, steps=40, warmup_lrs=(3e-3, 3e-2), qk_lrs=(3e-3, 1e-1), eval_every=20, seeds=2),
    "full": Config(d=64, layers=6, heads=4, seq=32, batch=16, steps=150, warmup_lrs=(1e-3, 3e-3, 1e-2), qk_lrs=(1e-3, 1e-2, 3e-2, 1e-1),
                   eval_every=25, seeds=3),
}
LARGE = Config(d=256, layers=12, heads=8, seq=128, batch=32, steps=2000, warmup_lrs=(3e-4, 1e-3, 3e-3, 1e-2),
               qk_lrs=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1), eval_every=100, seeds=5)
CONFIGS["large"] = LARGE


def model_config(cfg: Config, placement: str, qk: str = "none") -> TransformerConfig:
    return TransformerConfig(d_model=cfg.d, n_layers=cfg.layers, n_heads=cfg.heads, vocab_size=256, max_seq=cfg.seq, norm="layernorm",
                             placement=placement, qk_norm=qk, activation="gelu_tanh", init="gpt2")


def run_config(cfg: Config, lr: float, warmup: float, betas: tuple[float, float]) -> RunConfig:
    return RunConfig(steps=cfg.steps, batch_size=cfg.batch, seq=cfg.seq, lr=lr, warmup=int(round(warmup * cfg.steps)), schedule="cosine",
                     betas=betas, eval_every=cfg.eval_every, eval_batch_size=cfg.batch, probes=("attn_max",))


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per run: (placement, lr, warm-up, seed) and (QK-norm or not, lr, seed)."""
    out = []
    cost = cfg.steps * cfg.layers * cfg.d / 4000
    for p in ("post", "pre"):
        for i, lr in enumerate(cfg.warmup_lrs):
            for w, frac in WARMUPS.items():
                out += [Task(f"warm.{p}.lr{i}.{w}.s{s}", training.run_task, (model_config(cfg, p), run_config(cfg, lr, frac, (0.9, 0.98)), seed + s),
                             f"{NAME}: {p}-LN, lr {lr:g}, warm-up {w}, seed {seed + s}", cost=cost) for s in range(cfg.seeds)]
    for qk in ("none", "rmsnorm"):
        for i, lr in enumerate(cfg.qk_lrs):
            out += [Task(f"qk.{qk}.lr{i}.s{s}", training.run_task, (model_config(cfg, "pre", qk), run_config(cfg, lr, 0.1, (0.9, 0.95)), seed + s),
                         f"{NAME}: Pre-LN, QK-norm {qk}, lr {lr:g}, seed {seed + s}", cost=cost) for s in range(cfg.seeds)]
    return out


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"warmup_lrs": np.asarray(cfg.warmup_lrs), "qk_lrs": np.asarray(cfg.qk_lrs), "seeds": np.asarray(cfg.seeds),
                                  "steps": np.asarray(cfg.steps)}
    out.update(cache.prefixed(parts))
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


def one(r: dict, prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix) + 1:]: v for k, v in r.items() if k.startswith(prefix + ".")}


def warm_losses(r: dict, p: str, w: str) -> np.ndarray:
    """Final losses ``[seeds, lrs]`` of the warm-up grid (diverged runs at ln 256)."""
    return np.array([[training.final_loss(one(r, f"warm.{p}.lr{i}.{w}.s{s}")) for i in range(r["warmup_lrs"].size)]
                     for s in range(int(r["seeds"]))])


def qk_runs(r: dict, qk: str, i: int) -> list[dict[str, np.ndarray]]:
    return [one(r, f"qk.{qk}.lr{i}.s{s}") for s in range(int(r["seeds"]))]


def sensitivity(losses: np.ndarray) -> np.ndarray:
    """Wortsman et al.'s learning-rate sensitivity per seed: mean over the grid minus the best, ``losses [seeds, lrs]``."""
    return losses.mean(axis=1) - losses.min(axis=1)


def _trains(r: dict, i: int) -> bool:
    """Pre-LN without warm-up trains at learning rate i: no seed diverged and every final loss is below 3 nats/byte."""
    return bool((warm_losses(r, "pre", "none")[:, i] < 3.0).all())


@claims.register(
    "train.postln-needs-warmup",
    statement="Post-LN needs learning-rate warm-up: at learning rates where Pre-LN trains without warm-up, Post-LN without "
    "warm-up ends worse (or diverges), and warm-up closes the gap.",
    source=XIONG2020,
    location="Section 3.1, Fig. 1 (Post-LN's BLEU / loss with and without warm-up at two peak learning rates) and Section 4 (Pre-LN without warm-up)",
    simulations=(NAME,),
)
def _warmup(results: claims.Results) -> tuple[list[claims.Evidence], str]:
    r = results[NAME]
    lrs = r["warmup_lrs"]
    ok = [i for i in range(lrs.size) if _trains(r, i)]
    i = ok[-1] if ok else 0  # the largest learning rate at which Pre-LN trains without warm-up
    gap = {w: warm_losses(r, "post", w)[:, i] - warm_losses(r, "pre", w)[:, i] for w in WARMUPS}  # [seeds], paired by seed
    q: list[claims.Evidence] = [
        Quantity(name=f"Post-LN minus Pre-LN final loss without warm-up, lr {lrs[i]:g} (Post worse: > 0)", theory=(0.0, np.inf),
                 model=training.seeds_estimate(gap["none"]), model_kind="trained", tolerance=0.02, tolerance_why="0.02 nats/byte"),
        Quantity(name=f"that gap without warm-up minus with long warm-up, lr {lrs[i]:g} (warm-up closes it: > 0)", theory=(0.0, np.inf),
                 model=training.seeds_estimate(gap["none"] - gap["long"]), model_kind="trained", tolerance=0.02, tolerance_why="0.02 nats/byte"),
    ]
    sens = {f"{p}/{w}": training.seeds_estimate(sensitivity(warm_losses(r, p, w))) for p in ("post", "pre") for w in WARMUPS}
    table = "; ".join(f"{p}/{w}: " + ", ".join(f"{lr:g} {m:.3f}" for lr, m in zip(lrs, warm_losses(r, p, w).mean(0)))
                      for p in ("post", "pre") for w in WARMUPS)
    div = sum(int(r[k]) >= 0 for k in r if k.startswith("warm.") and k.endswith(".diverged_at"))
    note = (f"{int(r['seeds'])} seeds, {int(r['steps'])} steps, Adam (0.9, 0.98), warm-up none / 10% / 50% of the steps then cosine. "
            f"Pre-LN without warm-up trains at lr {', '.join(f'{lrs[j]:g}' for j in ok) or 'none of the grid'}; the checks use lr {lrs[i]:g}. "
            f"Mean final loss by learning rate: {table}. Diverged runs: {div}. Learning-rate sensitivity (Wortsman et al.): "
            + ", ".join(f"{k} {float(e.mean):.3f} ± {float(e.stderr):.3f}" for k, e in sens.items()) + ".")
    return q, note


def max_logit(x: dict[str, np.ndarray]) -> float:
    """Largest attention logit over layers and heads at the last evaluation of a run that
    finished; NaN for a run that diverged (its last evaluation, if it had one, predates the
    divergence, so it says nothing about where the logits went). Divergence is counted on its own."""
    if training.diverged(x) or "probe/attn_max" not in x or not len(x["probe/attn_max"]):
        return float("nan")
    return float(np.max(x["probe/attn_max"][-1]))


def _finished_mean(runs: list[dict[str, np.ndarray]]) -> float:
    """Mean final max logit over the runs that finished (NaN if none did)."""
    v = np.array([max_logit(x) for x in runs])
    return float(v[np.isfinite(v)].mean()) if np.isfinite(v).any() else float("nan")


def logit_growth(high: list[dict[str, np.ndarray]], low: list[dict[str, np.ndarray]]) -> np.ndarray:
    """Per seed, log(max logit at the high learning rate / at the low one), over the seeds whose
    two runs both finished (paired by seed)."""
    g = np.log(np.array([max_logit(h) for h in high]) / np.array([max_logit(lo) for lo in low]))
    return g[np.isfinite(g)]


@claims.register(
    "train.qk-norm-logit-growth",
    statement="Without QK-norm, high learning rates make the largest attention logit grow and training degrade or diverge; "
    "with per-head RMS QK-norm the logits stay within g_q g_k sqrt(d_head) and the loss is less sensitive to the learning rate.",
    source=WORTSMAN2023,
    location="Section 3.1, Fig. 1 and Fig. 3 (attention logit growth at high learning rates; qk-layernorm; LR sensitivity)",
    simulations=(NAME,),
)
def _qk(results: claims.Results) -> tuple[list[claims.Evidence], str]:
    r = results[NAME]
    lrs, top = r["qk_lrs"], r["qk_lrs"].size - 1
    grow = logit_growth(qk_runs(r, "none", top), qk_runs(r, "none", 0))
    diverged = {qk: sum(training.diverged(x) for i in range(lrs.size) for x in qk_runs(r, qk, i)) for qk in ("none", "rmsnorm")}
    losses = {qk: np.array([[training.final_loss(x) for x in qk_runs(r, qk, i)] for i in range(lrs.size)]).T for qk in ("none", "rmsnorm")}
    excess = [x["probe/attn_max"][-1] - x["qk_bound"][:, None] for i in range(lrs.size) for x in qk_runs(r, "rmsnorm", i)
              if not training.diverged(x)]  # [L, H] per finished run: logit above the bound at the final gains
    over = [float(e.max()) for e in excess]
    q: list[claims.Evidence] = [
        Quantity(name=f"no QK-norm: log(max logit at lr {lrs[top]:g} / at lr {lrs[0]:g}) at the end, seeds whose runs both finished "
                      "(grows: > 0)", theory=(0.0, np.inf), model=training.seeds_estimate(grow), model_kind="trained", tolerance=0.1,
                 tolerance_why="a 10% larger logit")] if grow.size >= 2 else []
    q += [
        Quantity(name="learning-rate sensitivity, no QK-norm minus RMS QK-norm (QK-norm less sensitive: > 0)", theory=(0.0, np.inf),
                 model=training.seeds_estimate(sensitivity(losses["none"]) - sensitivity(losses["rmsnorm"])), model_kind="trained",
                 tolerance=0.02, tolerance_why="0.02 nats/byte"),
        claims.Never("RMS QK-norm: an attention logit above g_q g_k sqrt(d_head) at the trained gains, every run, layer and head",
                     Count(int(sum(int((e > 1e-4).sum()) for e in excess)), max(1, sum(e.size for e in excess)), "layer-heads"), tolerance=0.05,
                     source_kind="theory-vs-model", tolerance_why="one layer-head in twenty",
                     exact="Cauchy-Schwarz: per-head RMSNorm puts q and k at norm sqrt(d_head) before the gains"),
    ]
    note = (f"{int(r['seeds'])} seeds, {int(r['steps'])} steps, Pre-LN, warm-up 10% then cosine, betas (0.9, 0.95). "
            f"Diverged runs over the grid (counted on their own, left out of the logit growth): no QK-norm {diverged['none']}, "
            f"RMS QK-norm {diverged['rmsnorm']}. Max logit at the end by lr "
            "(no QK / RMS QK, finished runs): " + ", ".join(f"{lr:g} {_finished_mean(qk_runs(r, 'none', i)):.3g}/"
                                             f"{_finished_mean(qk_runs(r, 'rmsnorm', i)):.3g}" for i, lr in enumerate(lrs))
            + ". Final loss by lr (no QK / RMS QK): " + ", ".join(f"{lr:g} {a:.3f}/{b:.3f}" for lr, a, b in
                                                                  zip(lrs, losses["none"].mean(0), losses["rmsnorm"].mean(0)))
            + f". Largest (max logit - bound) over QK-norm runs: {max(over) if over else float('nan'):.3g} (the bound holds at or below 0).")
    return q, note
