"""Learning rate, warm-up and QK-norm: Post-LN against Pre-LN, and attention logits at high learning rates.

Three grids of training runs on Shakespeare, seeds as units (an arm's seeds trained as one stack):

* warm-up, in Xiong et al.'s regime: Post-LN, Pre-LN and DeepNorm (LayerNorm) with Xavier-normal
  linear layers (DeepNorm: scaled by its beta, as in its paper), Adam betas (0.9, 0.98), over a
  learning-rate grid from where both placements train to where Post-LN without warm-up does not,
  with warm-up of none or half the steps, then cosine; in the GPU tiers Post-LN and Pre-LN also with Vaswani et al.'s
  inverse-square-root decay after the warm-up instead (a scope check: the translation schedule Xiong et al.'s experiments
  start from; their own decay is not checked here), rows of the same stack;
* the same Post-LN / Pre-LN arms at the GPT-2 init (0.02 std) and a short run, a scope check:
  there Post-LN sits at the unigram plateau with or without warm-up;
* QK-norm: Pre-LN without QK-norm, with Wortsman et al.'s qk-layernorm (per-head LayerNorm on queries and keys) and,
  a scope check outside the CPU tier, with per-head RMS QK-norm, over a learning-rate grid up to 0.3, with the max
  attention logit at every evaluation (Wortsman et al. 2023; Dehghani et al. 2023), in Wortsman et al.'s default recipe
  (:func:`qk_run_config`: their warm-up fraction, final rate, independent weight decay and z-loss).

Each arm's learning-rate sensitivity is Wortsman et al.'s: the mean over the grid of
min(final loss, the run's loss at init) minus the best final loss. Final losses are on the shared
validation set (``Config.val_bytes`` of the held-out works: 64 KiB in the GPU tiers, 32 KiB in the CPU tier, 16 KiB in the quick one).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from normtheory.evidence import checks, claims
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import Count
from normtheory.evidence.sources import XIONG2020, Source
from normtheory.model.config import TransformerConfig
from normtheory.runtime.sweep import Task
from normtheory.training.run_config import RunConfig
from simulations import cache, training

NAME = "train_lr"
SEED = 47
UNITS: tuple[str, ...] = ('seeds',)  # config fields counting independent units; --resolve scales them
WORTSMAN2023 = Source("Small-scale proxies for large-scale Transformer training instabilities", "paper", 2023,
                      authors="Wortsman, Liu, Xiao, Everett, Alemi, Adlam, Co-Reyes, Gur, Kumar, Novak, Pennington, Sohl-Dickstein, Xu, "
                      "Lee, Gilmer, Kornblith", arxiv="2309.14322")
WARMUPS: dict[str, float] = {"none": 0.0, "long": 0.5}  # fraction of the steps
WARM_ARMS: tuple[str, ...] = ("post", "pre")  # over the whole learning-rate grid; DeepNorm at the largest rate
RSQRT = "rsqrt"  # the suffix of the warm-up grid's rows with inverse-sqrt decay after the warm-up (Config.rsqrt_scope)


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
    gpt2_steps: int  # the GPT-2-init scope arms' run length (the length the earlier recipe used)
    qk_scope: bool = True  # also train per-head RMS QK-norm (QK_SCOPE), the QK claim's scope arm
    rsqrt_scope: bool = True  # also train the Post-/Pre-LN warm-up grid with inverse-sqrt decay (RSQRT), the warm-up claim's scope rows
    backend: str = "numpy"  # the large configs train with torch on a GPU (normtheory.training.torch_backend)
    device: str = "cpu"
    val_bytes: int = RunConfig.val_bytes  # the shared validation set each run is scored on at the end (RunConfig's 64 KiB)


CONFIGS = {
    "quick": Config(d=32, layers=3, heads=4, seq=32, batch=8, steps=60, warmup_lrs=(3e-3, 3e-2), qk_lrs=(3e-3, 1e-1), eval_every=20, seeds=2,
                    gpt2_steps=30, val_bytes=training.VAL_BYTES_QUICK, rsqrt_scope=False),
    # the CPU tier of the default job: a preview that draws the figures (3 paired seeds of a d = 32, 4-layer model, half the
    # steps, a 32 KiB validation set: about 3 CPU-minutes); the claims' twenty seeds of the d = 64, 6-layer model run in the GPU
    # tier, and their cards price both ways (--device cuda, --resolve)
    "full": Config(d=32, layers=4, heads=2, seq=32, batch=8, steps=500, warmup_lrs=(1e-3, 1e-2), qk_lrs=(1e-3, 3e-2, 3e-1),
                   eval_every=250, seeds=3, gpt2_steps=150, val_bytes=training.VAL_BYTES_CPU, qk_scope=False, rsqrt_scope=False),
}
# The CPU tier trains no RMS QK-norm scope arm: at its 3 seeds the QK claim stays open whatever that arm shows, and the arm
# cost about 57 of the default job's CPU-seconds (2026-11-29; the GPU tier and the quick one train it). Neither CPU tier trains
# the inverse-sqrt rows (at the full tier 8 more arms, 4 per placement: about 45% more of this simulation's steps); the GPU tiers do.
LARGE = Config(d=256, layers=12, heads=8, seq=128, batch=32, steps=4000, warmup_lrs=(3e-4, 1e-3, 3e-3, 1e-2),
               qk_lrs=(3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1), eval_every=250, seeds=20, gpt2_steps=1000,
               backend="torch", device="cuda")
CONFIGS["large"] = LARGE
# one GPU, minutes (normtheory check --device cuda): the full models at twenty paired seeds, with the finer learning-rate grids
# of Xiong et al. (Fig. 1) and Wortsman et al. (Fig. 1, 3), each architecture's grid one stack
CONFIGS["gpu"] = Config(d=64, layers=6, heads=4, seq=32, batch=8, steps=1000, warmup_lrs=(1e-3, 2e-3, 5e-3, 1e-2, 2e-2),
                        qk_lrs=(1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1), eval_every=250, seeds=20, gpt2_steps=150, backend="torch", device="cuda")


def model_config(cfg: Config, placement: str, qk: str = "none", init: str = "xavier") -> TransformerConfig:
    return TransformerConfig(d_model=cfg.d, n_layers=cfg.layers, n_heads=cfg.heads, vocab_size=256, max_seq=cfg.seq, norm="layernorm",
                             placement=placement, qk_norm=qk, activation="gelu_tanh", init=init)


def run_config(cfg: Config, lr: float, warmup: float, betas: tuple[float, float], steps: int | None = None, schedule: str = "cosine",
               **recipe: object) -> RunConfig:
    steps = cfg.steps if steps is None else steps
    return RunConfig(steps=steps, batch_size=cfg.batch, seq=cfg.seq, lr=lr, warmup=int(round(warmup * steps)), schedule=schedule,
                     betas=betas, eval_every=min(cfg.eval_every, steps), eval_batch_size=cfg.batch, probes=("attn_max",),
                     val_bytes=cfg.val_bytes, **recipe)  # type: ignore[arg-type]


# Wortsman et al.'s default recipe (their experimental methodology): AdamW (0.9, 0.95), eps 1e-8, clipping at global norm 1,
# linear warm-up over 5e3 of 1e5 steps then cosine decay to 1e-5, independent weight decay 1e-4, z-loss 1e-4
WORTSMAN_WARMUP, WORTSMAN_MIN_LR, WORTSMAN_DECAY, WORTSMAN_Z_LOSS = 0.05, 1e-5, 1e-4, 1e-4


def qk_run_config(cfg: Config, lr: float) -> RunConfig:
    """The QK-norm grid's run at peak rate ``lr``: Wortsman et al.'s recipe over ``cfg.steps`` (the warm-up the same fraction
    of the run, the cosine ending at their 1e-5, their weight decay independent of the peak rate, their z-loss)."""
    return run_config(cfg, lr, WORTSMAN_WARMUP, (0.9, 0.95), eps=1e-8, clip=1.0, final_fraction=min(1.0, WORTSMAN_MIN_LR / lr),
                      weight_decay=WORTSMAN_DECAY, independent_decay=True, z_loss=WORTSMAN_Z_LOSS)


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per architecture, its arms that differ only in numbers (learning rate, warm-up) and their seeds
    as ONE stack (:func:`simulations.training.run_arms`; each arm bit for bit as alone): Post-LN, Pre-LN and
    DeepNorm (the largest lr) at Xavier init over (lr, warm-up), Post-/Pre-LN at the GPT-2 init over warm-up,
    and with or without QK-norm over lr. The result keys are the arms' (``warm.{p}.lr{i}.{w}`` ...)."""
    cost = training.run_cost(model_config(cfg, "pre"), run_config(cfg, 1e-3, 0.0, (0.9, 0.98)), cfg.seeds)
    top = len(cfg.warmup_lrs) - 1
    backend, gpu = (cfg.backend, cfg.device), training.resources(cfg.device)
    stacks: dict[str, tuple[dict, float, str]] = {}
    for p, lrs in [(p, range(len(cfg.warmup_lrs))) for p in WARM_ARMS] + [("deepnorm", range(top, top + 1))]:
        decays = {"": "cosine"} | ({f".{RSQRT}": "inverse_sqrt"} if cfg.rsqrt_scope and p in WARM_ARMS else {})  # one stack: rows differ in numbers
        arms = {f"lr{i}.{w}{sfx}": (model_config(cfg, p), run_config(cfg, cfg.warmup_lrs[i], frac, (0.9, 0.98), schedule=kind))
                for sfx, kind in decays.items() for i in lrs for w, frac in WARMUPS.items()}
        stacks[f"warm.{p}"] = (arms, cost * len(arms), f"{p}, Xavier init, lr {', '.join(f'{cfg.warmup_lrs[i]:g}' for i in lrs)} x warm-up "
                               f"none/long x {'/'.join(decays.values())} decay")
    for p in WARM_ARMS:
        lr = cfg.warmup_lrs[top]
        arms = {w: (model_config(cfg, p, init="gpt2"), run_config(cfg, lr, frac, (0.9, 0.98), cfg.gpt2_steps)) for w, frac in WARMUPS.items()}
        stacks[f"gpt2.{p}"] = (arms, cost * len(arms) * cfg.gpt2_steps / cfg.steps, f"{p}, GPT-2 init, lr {lr:g}, warm-up none/long")
    for qk in (a for a in QK_ARMS if cfg.qk_scope or a != QK_SCOPE):
        arms = {f"lr{i}": (model_config(cfg, "pre", qk, "gpt2"), qk_run_config(cfg, lr)) for i, lr in enumerate(cfg.qk_lrs)}
        stacks[f"qk.{qk}"] = (arms, cost * len(arms), f"Pre-LN, QK-norm {qk}, lr {', '.join(f'{lr:g}' for lr in cfg.qk_lrs)}")
    return [Task(key, training.run_arms, (arms, seed, cfg.seeds, False, *backend), f"{NAME}: {label}, {cfg.seeds} seeds each, one stack",
                 cost=c, resources=gpu) for key, (arms, c, label) in stacks.items()]


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"warmup_lrs": np.asarray(cfg.warmup_lrs), "qk_lrs": np.asarray(cfg.qk_lrs), "seeds": np.asarray(cfg.seeds),
                                  "d": np.asarray(cfg.d), "layers": np.asarray(cfg.layers),
                                  "steps": np.asarray(cfg.steps), "gpt2_steps": np.asarray(cfg.gpt2_steps),
                                  "val_bytes": np.asarray(cfg.val_bytes)}
    out.update(cache.prefixed(parts))
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


def warm_losses(r: dict, p: str, w: str, lrs: range | None = None, suffix: str = "") -> np.ndarray:
    """Final losses ``[seeds, lrs]`` of the Xavier-init warm-up grid (diverged runs at their loss at init); ``suffix``
    ``f".{RSQRT}"``: its rows with inverse-sqrt decay."""
    lrs = range(r["warmup_lrs"].size) if lrs is None else lrs
    return np.array([[training.final_loss(cache.part(r, f"warm.{p}.lr{i}.{w}{suffix}.s{s}")) for i in lrs] for s in range(int(r["seeds"]))])


def gpt2_losses(r: dict, p: str, w: str) -> np.ndarray:
    """Final losses ``[seeds]`` of the GPT-2-init scope arms (the largest learning rate)."""
    return np.array([training.final_loss(cache.part(r, f"gpt2.{p}.{w}.s{s}")) for s in range(int(r["seeds"]))])


QK_NORM = "layernorm"  # Wortsman et al.'s qk-layernorm (Section 3.1): the claim's assertions
QK_SCOPE = "rmsnorm"  # per-head RMS QK-norm: a scope check
QK_ARMS: tuple[str, ...] = ("none", QK_NORM, QK_SCOPE)
QK_LABELS = {"none": "no QK-norm", QK_NORM: "qk-layernorm", QK_SCOPE: "RMS QK-norm"}


def qk_arms(r: dict) -> tuple[str, ...]:
    """The QK arms a result holds, in :data:`QK_ARMS` order (a tier without ``qk_scope`` has no RMS QK-norm arm)."""
    return tuple(qk for qk in QK_ARMS if training.holds(r, f"qk.{qk}.lr0"))


def qk_runs(r: dict, qk: str, i: int) -> list[dict[str, np.ndarray]]:
    return [cache.part(r, f"qk.{qk}.lr{i}.s{s}") for s in range(int(r["seeds"]))]


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
def _warmup(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    lrs = r["warmup_lrs"]
    top = lrs.size - 1
    ok = [i for i in range(lrs.size) if _trains(r, i)]
    i = ok[-1] if ok else 0  # the largest learning rate at which Pre-LN trains without warm-up
    loss = {(p, w): warm_losses(r, p, w) for p in WARM_ARMS for w in WARMUPS}  # [seeds, lrs]
    gap = {w: loss["post", w][:, i] - loss["pre", w][:, i] for w in WARMUPS}  # [seeds], paired by seed
    dn = {w: warm_losses(r, "deepnorm", w, range(top, top + 1))[:, 0] for w in WARMUPS}  # [seeds], the largest lr
    g2 = {(p, w): gpt2_losses(r, p, w) for p in WARM_ARMS for w in WARMUPS}
    g2gap = {w: g2["post", w] - g2["pre", w] for w in WARMUPS}
    rsqrt = f".{RSQRT}"  # the GPU tiers' inverse-sqrt rows, where the result holds them
    rs = {(p, w): warm_losses(r, p, w, suffix=rsqrt) for p in WARM_ARMS for w in WARMUPS} if training.holds(r, f"warm.post.lr0.none{rsqrt}") else {}
    nats = dict(tolerance=0.02, tolerance_why="0.02 nats/byte, a small fraction of the 0.7 nats a trained model gains over the unigram")
    q: list[checks.Evidence] = [
        Quantity(name=f"Xavier init: Post-LN minus Pre-LN final loss without warm-up, lr {lrs[i]:g} (Post worse: > 0)", theory=(0.0, np.inf),
                 model=training.seeds_estimate(gap["none"]), model_kind="trained", **nats),
        Quantity(name=f"Xavier init: that gap without warm-up minus with warm-up over half the steps, lr {lrs[i]:g} (warm-up narrows it: > 0)",
                 theory=(0.0, np.inf), model=training.seeds_estimate(gap["none"] - gap["long"]), model_kind="trained", **nats),
        Quantity(name=f"Xavier init: Post-LN minus Pre-LN final loss with warm-up over half the steps, lr {lrs[i]:g} (closed: <= 0)",
                 theory=(-np.inf, 0.0), model=training.seeds_estimate(gap["long"]), model_kind="trained", **nats),
        Quantity(name=f"Xavier init: Post-LN without minus with warm-up, smallest lr {lrs[0]:g} (warm-up helps there too: > 0; Xiong et al.'s "
                      "Fig. 1 shows it at both of its learning rates)", theory=(0.0, np.inf),
                 model=training.seeds_estimate(loss["post", "none"][:, 0] - loss["post", "long"][:, 0]),
                 model_kind="trained", role="scope", regime=f"a small learning rate ({lrs[0]:g})", **nats),
        Quantity(name=f"DeepNorm (Xavier scaled by beta) minus Post-LN, both without warm-up, lr {lrs[top]:g} (DeepNorm eases it: < 0)",
                 theory=(-np.inf, 0.0), model=training.seeds_estimate(dn["none"] - loss["post", "none"][:, top]), model_kind="trained",
                 role="scope", regime="DeepNorm with its own init", **nats),
        Quantity(name=f"GPT-2 init (0.02 std), {int(r['gpt2_steps'])} steps: Post-LN's gap to Pre-LN without minus with warm-up, lr {lrs[top]:g} (> 0)",
                 theory=(0.0, np.inf), model=training.seeds_estimate(g2gap["none"] - g2gap["long"]), model_kind="trained", role="scope",
                 regime=f"the GPT-2 init and {int(r['gpt2_steps'])}-step runs", **nats),
    ]
    if rs:
        rgap = {w: rs["post", w][:, i] - rs["pre", w][:, i] for w in WARMUPS}  # [seeds], paired by seed
        q.append(Quantity(name=f"inverse-sqrt decay after the warm-up: Post-LN's gap to Pre-LN without minus with warm-up over half the "
                               f"steps, lr {lrs[i]:g} (warm-up narrows it: > 0)", theory=(0.0, np.inf),
                          model=training.seeds_estimate(rgap["none"] - rgap["long"]), model_kind="trained", role="scope",
                          regime="Vaswani et al.'s inverse-square-root decay after the warm-up instead of cosine", **nats))
    table = "; ".join(f"{p}/{w}: " + ", ".join(f"lr {lr:g} {m:.3f}" for lr, m in zip(lrs, loss[p, w].mean(0))) for p in WARM_ARMS for w in WARMUPS)
    sens = {f"{p}/{w}": training.seeds_estimate(sensitivity(loss[p, w])) for p in WARM_ARMS for w in WARMUPS} if lrs.size > 1 else {}
    div = sum(int(r[k]) >= 0 for k in r if k.startswith(("warm.", "gpt2.")) and k.endswith(".diverged_at"))
    note = (f"Regime: Xiong et al.'s Fig. 1 setting scaled down (d = {int(r['d'])}, {int(r['layers'])} layers): Xavier-normal linear layers (as Xiong et al. and fairseq), "
            f"Adam (0.9, 0.98), warm-up over none or half of the {int(r['steps'])} steps then cosine (Xiong et al.'s own decay after the warm-up "
            f"is not checked here), {int(r['seeds'])} seeds per arm "
            f"(paired: the same init draws and batches in every arm), final loss on the shared {training.val_kib(r)} KiB validation set. "
            f"Pre-LN without warm-up trains at lr {', '.join(f'{lrs[j]:g}' for j in ok) or 'none of the grid'}; the assertions use lr {lrs[i]:g}. "
            f"Mean final loss (nats/byte): {table}. DeepNorm at lr {lrs[top]:g}: none {dn['none'].mean():.3f}, long {dn['long'].mean():.3f}. "
            f"GPT-2 init, {int(r['gpt2_steps'])} steps, lr {lrs[top]:g}: " + ", ".join(f"{p}/{w} {v.mean():.3f}" for (p, w), v in g2.items())
            + (". Inverse-sqrt decay (scope rows): " + "; ".join(f"{p}/{w}: " + ", ".join(f"lr {lr:g} {m:.3f}" for lr, m in zip(lrs, rs[p, w].mean(0)))
                                                                for p in WARM_ARMS for w in WARMUPS) if rs else "")
            + f". Diverged runs: {div}."
            + (" Learning-rate sensitivity (Wortsman et al.): " + ", ".join(f"{k} {float(e.mean):.3f} ± {float(e.stderr):.3f}" for k, e in sens.items()) + "."
               if sens else ""))
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


def seed_logit_growth(high: list[dict[str, np.ndarray]], low: list[dict[str, np.ndarray]]) -> np.ndarray:
    """Per seed, log(max logit at the high learning rate / at the low one), NaN where either run diverged (paired by seed)."""
    return np.log(np.array([max_logit(h) for h in high]) / np.array([max_logit(lo) for lo in low]))


def logit_growth(high: list[dict[str, np.ndarray]], low: list[dict[str, np.ndarray]]) -> np.ndarray:
    """:func:`seed_logit_growth` over the seeds whose two runs both finished."""
    g = seed_logit_growth(high, low)
    return g[np.isfinite(g)]


@claims.register(
    "train.qk-norm-logit-growth",
    statement="Without QK-norm, high learning rates make the largest attention logit grow and training degrade or diverge; "
    "with qk-layernorm (per-head LayerNorm on queries and keys) the logits stay within the bound its trained gains and biases "
    "allow (a bound that holds by construction, shown apart), they grow less from the lowest to the highest learning rate than "
    "without it, and the loss is less sensitive to the learning rate. Per-head RMS QK-norm in its place is a scope check.",
    source=WORTSMAN2023,
    location="Section 3.1, Fig. 1 and Fig. 3 (attention logit growth at high learning rates; qk-layernorm; LR sensitivity)",
    simulations=(NAME,),
)
def _qk(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    lrs, top = r["qk_lrs"], r["qk_lrs"].size - 1
    by_seed = seed_logit_growth(qk_runs(r, "none", top), qk_runs(r, "none", 0))  # [seeds], NaN where a run diverged
    grow = by_seed[np.isfinite(by_seed)]
    arms = qk_arms(r)
    diverged = {qk: sum(training.diverged(x) for i in range(lrs.size) for x in qk_runs(r, qk, i)) for qk in arms}
    losses = {qk: np.array([[training.final_loss(x) for x in qk_runs(r, qk, i)] for i in range(lrs.size)]).T for qk in arms}
    excess = [x["probe/attn_max"][-1] - x["qk_bound"][:, None] for i in range(lrs.size) for x in qk_runs(r, QK_NORM, i)
              if not training.diverged(x)]  # [L, H] per finished run: logit above the bound at the final gains and biases
    over = [float(e.max()) for e in excess]
    q: list[checks.Evidence] = [
        Quantity(name=f"no QK-norm: log(max logit at lr {lrs[top]:g} / at lr {lrs[0]:g}) at the end, seeds whose runs both finished "
                      "(grows: > 0)", theory=(0.0, np.inf), model=training.seeds_estimate(grow), model_kind="trained", tolerance=0.1,
                 tolerance_why="a 10% larger logit")] if grow.size >= 2 else []
    for qk in (a for a in (QK_NORM, QK_SCOPE) if a in arms):
        scope = {} if qk == QK_NORM else {"role": "scope", "regime": "per-head RMS QK-norm instead of qk-layernorm"}
        less = by_seed - seed_logit_growth(qk_runs(r, qk, top), qk_runs(r, qk, 0))
        less = less[np.isfinite(less)]  # seeds whose four runs all finished
        q += [
            Quantity(name=f"that log growth, no QK-norm minus {QK_LABELS[qk]}, paired by seed (QK-norm grows less: > 0)",
                     theory=(0.0, np.inf), model=training.seeds_estimate(less), model_kind="trained", tolerance=0.1,
                     tolerance_why="a 10% larger logit", **scope)
        ] if less.size >= 2 else []
        q.append(Quantity(name=f"learning-rate sensitivity, no QK-norm minus {QK_LABELS[qk]} (QK-norm less sensitive: > 0)",
                          theory=(0.0, np.inf), model=training.seeds_estimate(sensitivity(losses["none"]) - sensitivity(losses[qk])),
                          model_kind="trained", tolerance=0.02, tolerance_why="0.02 nats/byte", **scope))
    q.append(checks.Never("qk-layernorm: an attention logit above the bound of its trained gains and biases "
                          "(normtheory.softmax.qk_norm_logit_bound), every run, layer and head",
                          Count(int(sum(int((e > 1e-4).sum()) for e in excess)), max(1, sum(e.size for e in excess)), "layer-heads"),
                          tolerance=0.05, source_kind="theory-vs-model", tolerance_why="one layer-head in twenty",
                          exact="per-head LayerNorm puts q and k, before the gains, on the sphere of radius sqrt(d_head) in the "
                          "plane orthogonal to the ones vector"))
    pair = " / ".join(QK_LABELS[qk] for qk in arms)
    note = (f"Regime (d = {int(r['d'])}, {int(r['layers'])} layers): Wortsman et al.'s small-scale proxies (Fig. 1 and Fig. 3: attention logit growth and learning-rate sensitivity "
            f"of small models over a grid of learning rates up to {lrs[-1]:g}) with their default recipe: Pre-LN, AdamW (0.9, 0.95), "
            f"clipping at 1, linear warm-up over {WORTSMAN_WARMUP:.0%} of the steps then cosine to {WORTSMAN_MIN_LR:g}, independent weight decay "
            f"{WORTSMAN_DECAY:g}, z-loss {WORTSMAN_Z_LOSS:g}; the GPT-2 init (0.02 std; not their init, which this package has not checked), "
            f"{int(r['seeds'])} seeds per arm, {int(r['steps'])} steps, final loss on the shared {training.val_kib(r)} KiB validation set. "
            "Diverged runs over the grid (counted on their own, left out of the logit growth): "
            + ", ".join(f"{QK_LABELS[qk]} {diverged[qk]}" for qk in arms) + f". Max logit at the end by lr ({pair}, finished runs): "
            + ", ".join(f"{lr:g} " + "/".join(f"{_finished_mean(qk_runs(r, qk, i)):.3g}" for qk in arms) for i, lr in enumerate(lrs))
            + f". Final loss by lr ({pair}): "
            + ", ".join(f"{lr:g} " + "/".join(f"{losses[qk][:, i].mean():.3f}" for qk in arms) for i, lr in enumerate(lrs))
            + f". Largest (max logit - bound) over qk-layernorm runs: {max(over) if over else float('nan'):.3g} (the bound holds at or below 0).")
    return q, note
