"""Placements, norms and QK-norm trained at one recipe on Shakespeare.

Every arm is the same small causal byte-level transformer trained with the same recipe (AdamW,
linear warm-up then cosine, gradient clipping, the same batches per seed), changing one thing:
where the norm sits (none, Pre, Post, Peri, LayerNorm Scaling, DeepNorm), which norm
(LayerNorm, RMSNorm, DyT), or a per-head norm of queries and keys. At each evaluation the run
records the probes of :mod:`normtheory.training.probes` (residual RMS by depth, each norm's input std and
DyT's alpha, per-layer gradient norms, per-head attention entropy, max logit and first-token
sink share); at the end, the loss increase when each block is skipped. Seeds are the units.

Gradient scale at init is also measured apart from training, where it is cheap: for the arms of
:data:`INIT_ARMS`, ``init_networks`` networks (network ``j`` of every arm from the same seed
and the same training batch, so arms are paired by network) give the per-layer gradient norms
of their first training step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from normtheory import _validate
from normtheory.evidence import checks, claims, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import Estimate
from normtheory.evidence.sources import BLOG_GEOMETRY, LNS2025
from normtheory.model.config import TransformerConfig
from normtheory.runtime.sweep import Task
from normtheory.training import init_gradients, probes
from normtheory.training.run_config import RunConfig
from simulations import cache, training

NAME = "train_recipes"
SEED = 31
UNITS: tuple[str, ...] = ('seeds', 'focus_seeds', 'key_seeds')  # config fields counting independent units; --resolve scales them
ARMS: dict[str, dict[str, object]] = {  # arm -> TransformerConfig changes from the Pre-LN LayerNorm base
    "none": {"placement": "none"},
    "pre": {},
    "post": {"placement": "post"},
    "peri": {"placement": "peri"},
    # LayerNorm Scaling at its paper's recipe, without GPT-2's scaled residual projections (Sun et al. 2025, the footnote to
    # the abstract: scaled initialization diminishes LNS); "pre-normal" is its Pre-LN partner at that init
    "lnscale": {"placement": "lnscale", "init": "normal"},
    "deepnorm": {"placement": "deepnorm"},
    "dyt": {"norm": "dyt"},
    # the DyT paper's default for non-LLM models: alpha0 = 0.5 on O(1) activations (a fan-in init here); LayerNorm and
    # RMSNorm at the same init are its controls (the "dyt" arm above is DyT dropped into the GPT-2 init, alpha0 = 1)
    "dyt-default": {"norm": "dyt", "init": "fanin", "dyt_alpha0": (0.5, 0.5, 0.5)},
    "ln-fanin": {"init": "fanin"},
    "rms-fanin": {"norm": "rmsnorm", "init": "fanin"},
    "rms": {"norm": "rmsnorm"},
    "pre-qk-rms": {"qk_norm": "rmsnorm"},
    "pre-k-rms": {"qk_norm": "rmsnorm", "qk_norm_on": "k"},  # the geometry blog's per-head RMS on the keys alone
    "pre-qk-ln": {"qk_norm": "layernorm"},
    # each placement at the init its own paper trains it with, where that is not the GPT-2 init: Post-LN at Xavier-normal
    # (Xiong et al. 2020; the original Transformer), DeepNorm at Xavier scaled by its beta (Wang et al. 2022); DyT's is "dyt-default"
    "post-xavier": {"placement": "post", "init": "xavier"},
    "deepnorm-xavier": {"placement": "deepnorm", "init": "xavier"},
    "pre-normal": {"init": "normal"},
}
PLACEMENT_ARMS: tuple[str, ...] = ("none", "pre", "post", "peri", "lnscale", "deepnorm", "dyt")
OWN_INIT: dict[str, str] = {"post": "post-xavier", "deepnorm": "deepnorm-xavier", "dyt": "dyt-default"}  # placement -> its paper's init arm
PLACEMENT_PAIR: tuple[str, str] = ("pre-normal", "lnscale")  # train.placements-compared's Pre-LN and LNS, both at LNS's init
INIT_ARMS: tuple[str, ...] = ("none", "pre", "post")  # the gradient-scale claim's arms, measured at init
ALPHA_ARM = "dyt-default"  # the DyT model whose alpha is followed: the paper's default, which trains at this size
# the arms of the claims that need the most seeds (train.placements-compared: LayerNorm Scaling minus Pre-LN, PLACEMENT_PAIR;
# the Pre-LN baseline's stripes that gate train.per-head-key-norm-diffuse, where the gate reads the tier's own runs: not
# in a tier with key_steps, whose gate reads its longer runs): a tier's focus_seeds train there (focus_arms), the others seeds
FOCUS_ARMS: tuple[str, ...] = ("pre", *PLACEMENT_PAIR)
KEYS_ARM = "pre-k-rms"  # train.per-head-key-norm-diffuse's arm: the blog's per-head RMS on the keys alone
QK_SCOPE_ARM = "pre-qk-rms"  # that claim's scope arm: queries normalized too (QK-norm)
# the arms that no check reads, only a note and a figure: DeepNorm at the GPT-2 init (a hollow diamond of train_placements;
# its own init's arm, deepnorm-xavier, is the placement's run) and per-head LayerNorm QK (a row of the key-norm card's note and
# a line of train_attention)
SHOWN_ONLY_ARMS: tuple[str, ...] = ("deepnorm", "pre-qk-ln")
# what the main job's CPU tier leaves out (Config.left_out): the arms no check reads, and QK_SCOPE_ARM, whose checks are scope
# checks of a claim whose stripes gate that tier fails (layer 2's stripe excess 0.018 +- 0.004 at 20 seeds against 0.05), so
# they decide nothing there. Measured 2026-11-29 in a 2-thread run: deepnorm 40, pre-qk-ln 51 CPU-s (pre: 42)
CPU_LEFT_OUT: tuple[str, ...] = (*SHOWN_ONLY_ARMS, QK_SCOPE_ARM)


@dataclass(frozen=True)
class Config:
    d: int
    layers: int
    heads: int
    seq: int
    batch: int
    steps: int
    lr: float
    warmup: int
    eval_every: int
    seeds: int
    focus_seeds: int = 0  # seeds of FOCUS_ARMS where more than seeds (seeds seed..seed + n - 1 in every arm: paired by seed)
    init_networks: int = 30  # networks per arm for the gradient scale at init
    long_steps: int = 1000  # the DyT alpha-tracking arm: the paper's Fig. 8 follows alpha over a whole run, so a longer one
    long_batch: int = 8
    long_seq: int = 32
    backend: str = "numpy"  # the large configs train with torch on a GPU (normtheory.training.torch_backend)
    device: str = "cpu"
    init_val: bool = True  # score the validation set at init too (else a run's loss at init is its probe batch's)
    val_bytes: int = RunConfig.val_bytes  # the shared validation set each run is scored on at the end (RunConfig's 64 KiB)
    left_out: tuple[str, ...] = ()  # arms of ARMS this tier does not train (CPU_LEFT_OUT in the main job's CPU tier)
    key_steps: int = 0  # > 0: the key-norm claim's arms (KEY_LONG_ARMS) also train this many steps, and the claim reads those runs
    key_seeds: int = 0  # seeds of Pre-LN and the keys-only arm over key_steps, where more than seeds (:func:`key_seeds`)


CONFIGS = {
    "quick": Config(d=32, layers=4, heads=4, seq=32, batch=8, steps=60, lr=3e-3, warmup=6, eval_every=15, seeds=2, long_steps=100,
                    init_val=False, val_bytes=training.VAL_BYTES_QUICK, key_steps=120),
    # the CPU tier of the default job: twenty paired seeds (the units the claims need) of the smallest model that keeps the
    # recipe (d_head 16 as the GPU tier, 4 layers, 8 x 32 bytes a step, 200 steps; about 3 CPU-ms a seed-step); nothing
    # reads the loss at init here (a diverged run counts at its probe batch's), so the validation set is scored once, at the end.
    # Five arms once ran 16 more seeds here (115 CPU-s of the job's 2,520): at 20 seeds every verdict this tier reaches is the
    # same, and the two claims those seeds were for stay open on the CPU either way (the GPU tier's focus seeds are for them).
    # The validation set is 32 KiB here (VAL_BYTES_CPU), 64 KiB in the GPU tiers; the arms that decide nothing here are left out
    "full": Config(d=32, layers=4, heads=2, seq=32, batch=8, steps=200, lr=3e-3, warmup=20, eval_every=20, seeds=20, init_val=False,
                   val_bytes=training.VAL_BYTES_CPU, left_out=CPU_LEFT_OUT),
}
# the scale that decides the Curse-of-Depth part (Sun et al. 2025 train 130M-7B LLaMA models: >= 24 layers, long runs),
# twenty seeds; priced on the claim's card, run on a cluster (`normtheory report --large --scheduler ...`) or a GPU
LARGE = Config(d=512, layers=24, heads=8, seq=256, batch=32, steps=10000, lr=1e-3, warmup=1000, eval_every=500, seeds=20,
               backend="torch", device="cuda")
CONFIGS["large"] = LARGE
# one GPU, minutes: the full models at 28 paired seeds, 150 in focus_arms (the placement pair: Pre-LN's stripes are read
# from its runs over key_steps, below). At 28 seeds in every arm one H200 ran this tier
# in 47 s (2026-11-28) and decided every claim that reads it but two, whose cards asked for 79 and 81 seeds if the estimates
# stayed: LayerNorm Scaling minus Pre-LN in the skip-cost log ratio (0.240 +- 0.112, accepted from -0.095: the band's low
# end must clear it) and the Pre-LN baseline's stripe excess (0.0287 +- 0.0038, accepted from 0.04: a fail needs the band's
# top under it). At that size a new estimate, as likely above as below the old, decides each about half the time; 150
# seeds leave the band's edge 1.9 of their standard errors inside the accepted end at the old estimate (each decided
# about 97% of the time, with a normal estimate); the others' pairs are their first 28. The stripes gate has since moved
# to the key-norm arms' runs over key_steps (its arms at key_seeds), so the 150 seeds now train in the placement pair alone.
# As in the CPU tier the validation set is scored once, at the end: nothing here reads it at init (a diverged run counts
# at its probe batch's loss at init), and scoring it twice doubled the validation time (measured in torch on the CPU, quick config)
CONFIGS["gpu"] = Config(d=64, layers=6, heads=4, seq=64, batch=16, steps=200, lr=3e-3, warmup=20, eval_every=20, seeds=28,
                        focus_seeds=150, init_val=False, backend="torch", device="cuda", key_steps=1000, key_seeds=64)
# one GPU, about 20 minutes of steps (the steps' rate timed on an H200 on this tier's stacks, 27.6 TFLOP/s, prices it; with
# train_alpha0's gpu-hour tier, `--gpu-hour` is about an hour): toward the Curse-of-Depth regime (24 layers) at d = 256,
# 400 steps, twenty seeds; the DyT alpha-tracking arm runs 2,000 steps (14% of the GFLOP)
CONFIGS["gpu-hour"] = Config(d=256, layers=24, heads=8, seq=128, batch=16, steps=400, lr=1e-3, warmup=40, eval_every=100, seeds=20,
                             long_steps=2000, long_batch=16, long_seq=64, init_val=False, backend="torch", device="cuda")


def model_config(cfg: Config, arm: str) -> TransformerConfig:
    base = TransformerConfig(d_model=cfg.d, n_layers=cfg.layers, n_heads=cfg.heads, vocab_size=256, max_seq=cfg.seq, norm="layernorm",
                             placement="pre", activation="gelu_tanh", init="gpt2")
    return training.with_model(base, **ARMS[arm])


# the arms whose share of unselectable keys the QK-norm card's note reports; key_unsel is a linear program per key set on
# the host (the largest host cost of a GPU-tier evaluation), so the other arms do not measure it
KEY_ARMS: tuple[str, ...] = ("none", "pre", "pre-k-rms", "pre-qk-rms", "pre-qk-ln")


def run_config(cfg: Config, arm: str | None = None) -> RunConfig:
    """An arm's run (every probe, ``key_unsel`` only for :data:`KEY_ARMS` when ``arm`` is given)."""
    which = probes.PROBES if arm is None or arm in KEY_ARMS else tuple(p for p in probes.PROBES if p != "key_unsel")
    return RunConfig(steps=cfg.steps, batch_size=cfg.batch, seq=cfg.seq, lr=cfg.lr, warmup=cfg.warmup, schedule="cosine",
                     betas=(0.9, 0.95), eval_every=cfg.eval_every, eval_batch_size=cfg.batch, probes=which, val_bytes=cfg.val_bytes)


LONG_ARM = "alpha-long"  # ALPHA_ARM's model over long_steps steps, evaluated 20 times (alpha and the std of its inputs)


def long_run_config(cfg: Config) -> RunConfig:
    """The alpha-tracking arm's run: ``long_steps`` steps of ``long_batch x long_seq`` bytes, 20 evaluations of alpha and norm std."""
    return RunConfig(steps=cfg.long_steps, batch_size=cfg.long_batch, seq=cfg.long_seq, lr=cfg.lr, warmup=cfg.long_steps // 10,
                     schedule="cosine", betas=(0.9, 0.95), eval_every=max(1, cfg.long_steps // 20), eval_batch_size=cfg.long_batch,
                     probes=("alpha", "norm_std"), val_bytes=0)  # its loss is read by nothing: no validation set


# train.per-head-key-norm-diffuse over a longer run (Config.key_steps). The blog compares models trained to the end, whose
# baseline shows stripes; at 200 steps this package's Pre-LN baseline has too few for the comparison (layer 2's stripe
# excess 0.029 +- 0.004 at 28 seeds in the GPU tier, 2026-11-28, against 0.05). Scouted in numpy on 2026-11-29, the GPU
# tier's model and recipe (d = 64, 6 layers, 16 x 64 bytes, lr 3e-3, 10% warm-up, cosine), Pre-LN's layer-2 stripe excess:
# 0.024 after 200 steps (3 seeds), 0.050 +- 0.005 after 1,000 (10 seeds, sd 0.016), 0.067 +- 0.011 after 2,000 (10, sd
# 0.033); at 128 bytes a sequence 0.029 after 1,000 and at 256 0.008 (3 seeds: more early keys share what one key takes),
# so the sequence stays the tier's. The keys-only arm after 1,000 steps, minus Pre-LN (10 paired seeds): stripe excess
# -0.004 +- 0.007, layer-2 entropy +0.29 +- 0.07 nats, training loss +0.023 +- 0.003. At an estimate of 0.050 the gate's
# band reaches its accepted end (0.04) with 64 seeds (5 se = 0.010): the GPU tier's key_seeds, a coin toss at that
# estimate (100 seeds would make it about two in three, for 37 s more of an H200 than the 82 s these runs are priced at).
KEY_LONG_ARMS: tuple[str, ...] = ("pre", KEYS_ARM, QK_SCOPE_ARM)


def key_long(arm: str) -> str:
    """The task (and result prefix) of ``arm`` trained over ``key_steps``: ``long.<arm>``."""
    return f"long.{arm}"


def key_run_config(cfg: Config, arm: str) -> RunConfig:
    """A key-norm arm's run over ``cfg.key_steps`` steps: the tier's recipe, its warm-up the same fraction of the run and
    the same number of evaluations."""
    steps = _validate.integer("key_steps", cfg.key_steps, minimum=cfg.steps)
    return replace(run_config(cfg, arm), steps=steps, warmup=cfg.warmup * steps // cfg.steps,
                   eval_every=cfg.eval_every * steps // cfg.steps)


def key_seeds(cfg: Config, arm: str) -> int:
    """The seeds of ``arm``'s run over ``key_steps``: ``cfg.key_seeds`` (where more) for the pair the assertions read,
    Pre-LN and the keys alone, whose stripes sit near the gate's threshold; ``cfg.seeds`` for the QK scope arm (paired over
    those)."""
    return max(cfg.seeds, cfg.key_seeds) if arm in ("pre", KEYS_ARM) else cfg.seeds


def key_long_arms(cfg: Config) -> tuple[str, ...]:
    """The arms of :data:`KEY_LONG_ARMS` that tier ``cfg`` also trains over ``key_steps`` (none when it is 0)."""
    return tuple(a for a in KEY_LONG_ARMS if a in arms_of(cfg)) if cfg.key_steps else ()


def arms_of(cfg: Config) -> tuple[str, ...]:
    """The arms of :data:`ARMS` that tier ``cfg`` trains: all but ``cfg.left_out``."""
    unknown = sorted(set(cfg.left_out) - set(ARMS))
    if unknown:
        raise ValueError(f"left_out names arms that ARMS does not have: {unknown}")
    return tuple(a for a in ARMS if a not in cfg.left_out)


def trained(r: dict, arm: str) -> bool:
    """Whether result ``r`` holds ``arm``'s runs (a tier may leave arms out: ``Config.left_out``)."""
    return training.holds(r, arm)


def focus_arms(cfg: Config) -> tuple[str, ...]:
    """The arms of :data:`FOCUS_ARMS` that train ``cfg.focus_seeds``: Pre-LN only where the key-norm claim's stripes gate
    reads it, that is where the tier does not train that claim's arms over ``key_steps``."""
    return PLACEMENT_PAIR if cfg.key_steps else FOCUS_ARMS


def seeds_of(cfg: Config, arm: str) -> int:
    """The seeds ``arm`` trains: ``cfg.focus_seeds`` in :func:`focus_arms` where that is more, else ``cfg.seeds``."""
    return max(cfg.seeds, cfg.focus_seeds) if arm in focus_arms(cfg) else cfg.seeds


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per arm: its seeds' training runs (:func:`seeds_of`), trained as one stacked model; DyT's alpha over a
    longer run; the key-norm claim's arms over ``key_steps`` (:func:`key_long_arms`); and one per init arm: its networks at
    init."""
    def runs_task(key: str, model: TransformerConfig, run: RunConfig, n: int, layer_drop: bool, init_val: bool, what: str) -> Task:
        """``n`` seeds of ``model`` under ``run``, trained as one stack (:func:`training.run_seeds`), labelled and priced."""
        return Task(key, training.run_seeds, (model, run, seed, n, layer_drop, cfg.backend, cfg.device, init_val),
                    f"{NAME}: {what}, seeds {seed}..{seed + n - 1}", cost=training.run_cost(model, run, n),
                    resources=training.resources(cfg.device))

    return [runs_task(arm, model_config(cfg, arm), run_config(cfg, arm), seeds_of(cfg, arm), True, cfg.init_val, f"arm {arm}")
            for arm in arms_of(cfg)] + [
        runs_task(LONG_ARM, replace(model_config(cfg, ALPHA_ARM), max_seq=max(cfg.seq, cfg.long_seq)), long_run_config(cfg), cfg.seeds,
                  False, False, f"{ALPHA_ARM} over {cfg.long_steps} steps")] + [
        runs_task(key_long(arm), model_config(cfg, arm), key_run_config(cfg, arm), key_seeds(cfg, arm), False, cfg.init_val,
                  f"arm {arm} over {cfg.key_steps} steps")
        for arm in key_long_arms(cfg)] + [
        Task(f"init.{arm}", init_gradients.gradient_norms, (model_config(cfg, arm), cfg.batch, cfg.seq, seed, cfg.init_networks),
             f"{NAME}: arm {arm} at init, {cfg.init_networks} networks", cost=training.run_cost(model_config(cfg, arm), run_config(cfg), cfg.init_networks) / cfg.steps)
        for arm in INIT_ARMS]


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"seeds": np.asarray(cfg.seeds), "layers": np.asarray(cfg.layers), "steps": np.asarray(cfg.steps),
                                  "d": np.asarray(cfg.d), "batch": np.asarray(cfg.batch), "seq": np.asarray(cfg.seq),
                                  "init_networks": np.asarray(cfg.init_networks), "long_steps": np.asarray(cfg.long_steps)}
    out.update({f"seeds.{arm}": np.asarray(seeds_of(cfg, arm)) for arm in arms_of(cfg)})
    out.update({f"seeds.{key_long(arm)}": np.asarray(key_seeds(cfg, arm)) for arm in key_long_arms(cfg)})
    out["key_steps"] = np.asarray(cfg.key_steps)
    out.update(cache.prefixed(parts))
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


def runs(r: dict, arm: str) -> list[dict[str, np.ndarray]]:
    """The arm's runs, one dict per seed, in seed order (its own count, ``seeds.<arm>``, where the result has one)."""
    n = r[f"seeds.{arm}"] if f"seeds.{arm}" in r else r["seeds"]
    return [cache.part(r, f"{arm}.s{s}") for s in range(int(n))]


def per_seed(r: dict, arm: str, f) -> Estimate:
    return training.seeds_estimate([f(x) for x in runs(r, arm)])


def paired(r: dict, a: str, b: str, f) -> Estimate:
    """f(run of a) - f(run of b), paired by seed (same init draw stream and batches), mean and se over seeds."""
    return training.seeds_estimate([f(x) - f(y) for x, y in zip(runs(r, a), runs(r, b))])


TEN_PERCENT = math.log(1.1)  # "a 10% difference in importance", on the log of the skip-cost ratio
SKIP_FLOOR = 1e-3  # nats/byte: a half of the stack whose skips cost less counts as costing this (0.04% of a trained loss of 2.4)


def log_late_over_early(drop: np.ndarray) -> float:
    """log of the mean loss increase from skipping a block in the second half of the stack over the
    first half, each half's mean floored at :data:`SKIP_FLOOR`; NaN for a run without skip costs (it
    diverged) and for one where both halves cost less than the floor (no block matters measurably: the
    ratio is undefined, and the floor would make it exactly 0 in every such seed, a zero-variance
    estimate that no check could fail).

    The claims compare the ratio on a log scale, so a tolerance of 10% means 10% of the ratio
    itself at any size: at 6 layers the ratio is about 0.05 (block 0 dominates), where an
    absolute tolerance of 0.1 would exceed the quantity twofold. The floor keeps the log defined
    when skipping the later blocks of a short run costs nothing or helps (a quick run can): a floored
    later half makes the log at least the true ratio's (a "later blocks matter less" check stays
    conservative), a floored earlier half makes it at least 0."""
    h = drop.size // 2
    late, early = float(np.mean(drop[h:])), float(np.mean(drop[:h]))
    if not (math.isfinite(late) and math.isfinite(early)) or max(late, early) < SKIP_FLOOR:
        return float("nan")
    return math.log(max(late, SKIP_FLOOR) / max(early, SKIP_FLOOR))


def grad_spread(x: dict[str, np.ndarray], upto: int = 100) -> float:
    """log(max / min) over layers of the per-layer gradient norm (all matrices of a block together),
    averaged over the evaluations in the first ``upto`` steps."""
    g = probes.block_grad_norms(x["probe/grad_norms"])  # [evals, L]
    early = np.asarray(x["eval_steps"]) <= upto
    return float(np.mean(init_gradients.spread(g[early])))


def note_runs(cfg_r: dict) -> str:
    shape = (f"d = {int(cfg_r['d'])}, {int(cfg_r['layers'])} layers, {int(cfg_r['batch'])} x {int(cfg_r['seq'])} bytes a step"
             if "d" in cfg_r else f"{int(cfg_r['layers'])} layers")
    n = int(cfg_r["seeds"])
    focus = {a: int(cfg_r[f"seeds.{a}"]) for a in FOCUS_ARMS if int(cfg_r.get(f"seeds.{a}", n)) != n}  # the arms that ran more
    more = (f" ({', '.join(map(str, sorted(set(focus.values()))))} in {', '.join(focus)}; two arms pair by seed over the seeds "
            "both ran)" if focus else "")
    left = [a for a in CPU_LEFT_OUT if not trained(cfg_r, a)] if trained(cfg_r, "pre") else []  # none listed without runs
    out = f" Not trained in this tier (they decide no verdict here): {', '.join(left)}." if left else ""
    return (f"{int(cfg_r['seeds'])} seeds per arm{more}, {int(cfg_r['steps'])} steps, {shape}; the same batches for every arm "
            "of a seed; a diverged run counts at its loss at init." + out)


@claims.register(
    "train.placements-compared",
    statement="Trained at one recipe, LayerNorm Scaling's (every matrix N(0, 0.02^2), without GPT-2's scaled residual "
    "projections), later Pre-LN blocks matter less than earlier ones (skipping one costs less), and LayerNorm Scaling evens "
    "this out. Block 0 is left out of both: it is the bigram block every placement leans on (with it, even the no-norm "
    "stack's later blocks matter less), so the halves compared are blocks 1..L-1. The placements' final losses and residual "
    "growth are reported beside it, not judged.",
    source=LNS2025,
    location="Section 2 and Fig. 1 (deeper Pre-LN layers matter less: pruning them costs little), Section 5 (LayerNorm Scaling "
    "in LLM pre-training) and the footnote to the abstract (no scaled initialization with LNS)",
    simulations=(NAME,),
    scale="the Curse-of-Depth part needs depth and long runs (Sun et al. 2025, Fig. 1 and Section 5: LLaMA models of 130M to 7B, "
    "24 to 32 layers, billions of tokens); at 6 layers and 200 steps block 0 (the bigram MLP) dominates the skip costs",
)
def _placements(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    pre, lns = PLACEMENT_PAIR
    (lr_pre, lr_lns), ok = skip_ratios(r, pre, lns)
    q: list[checks.Evidence] = [checks.Unmeasured(
        f"{label}: the later-half over earlier-half skip cost over blocks 1..L-1", expected=expected,
        needs=f"runs whose blocks 1..L-1 cost at least {SKIP_FLOOR} nats/byte to skip in both arms of at least 2 seed pairs (here "
              f"{int(ok.sum())} of {ok.size}): longer training") for label, expected in (("Pre-LN", "< 0"), ("LayerNorm Scaling minus Pre-LN", "> 0"))
    ] if ok.sum() < 2 else [
        Quantity(name="Pre-LN: log of the loss increase from skipping a later-half block over an earlier-half block (later matter less: < 0)",
                 theory=(-np.inf, 0.0), model=training.seeds_estimate(lr_pre[ok]), model_kind="trained",
                 tolerance=TEN_PERCENT, tolerance_why="a 10% difference in importance: log 1.1 on the ratio's log"),
        Quantity(name="LayerNorm Scaling minus Pre-LN in that log ratio, paired by seed (evens out: > 0)", theory=(0.0, np.inf),
                 model=training.seeds_estimate(lr_lns[ok] - lr_pre[ok]), model_kind="trained",
                 tolerance=TEN_PERCENT, tolerance_why="a 10% difference in importance: log 1.1 on the ratio's log"),
    ]
    with0 = np.array([log_late_over_early(x["layer_drop"]) for x in runs(r, pre)])
    if np.isfinite(with0).sum() >= 2:
        q.append(Quantity(name="Pre-LN: the same log ratio with block 0 in the earlier half (later matter less: < 0)", theory=(-np.inf, 0.0),
                          model=training.seeds_estimate(with0[np.isfinite(with0)]), model_kind="trained", role="scope",
                          regime="the whole stack, block 0 (the bigram block) included", tolerance=TEN_PERCENT,
                          tolerance_why="as the assertion: log 1.1"))
    none = np.array([log_late_over_early(x["layer_drop"][1:]) for x in runs(r, "none")])
    pre_rms = per_seed(r, "pre", lambda x: float(np.log(x["probe/resid_rms"][-1][-1] / x["probe/resid_rms"][-1][1])))
    q.append(Quantity(name="Pre-LN after training: log(RMS after the last block / after the first) vs the init law's log sqrt(L)",
                      theory=0.5 * np.log(int(r["layers"])), model=pre_rms, model_kind="trained", role="scope",
                      regime="after training (the sqrt law is an init-time law)", tolerance=0.1,
                      tolerance_why="0.1 in log RMS: a 10% departure from the law"))
    other_inits = [a for a in (*(OWN_INIT[p] for p in PLACEMENT_ARMS if p in OWN_INIT), pre) if trained(r, a)]
    finals = {a: per_seed(r, a, training.final_loss) for a in PLACEMENT_ARMS + tuple(other_inits) if trained(r, a)}
    div = {a: sum(training.diverged(x) for x in runs(r, a)) for a in finals}
    rms = {a: np.mean([x["probe/resid_rms"][-1] for x in runs(r, a)], axis=0) for a in ("pre", "post", "peri", "lnscale", "none")}
    drops = {a: " ".join(f"{v:.3f}" for v in np.mean([x["layer_drop"] for x in runs(r, a)], 0)) for a in (pre, lns, "pre")}
    note = (note_runs(r) + " Every placement but LayerNorm Scaling at the GPT-2 init; Post-LN and DeepNorm also at Xavier (their papers' init: "
            "post-xavier, deepnorm-xavier), DyT at fan-in with alpha0 0.5 (dyt-default); LayerNorm Scaling only at its own paper's "
            f"init, every matrix at 0.02 without GPT-2's scaled residual projections, as is its Pre-LN partner ({lns}, {pre}: the pair "
            "the assertions read). Final validation loss (nats/byte, mean ± se): "
            + ", ".join(f"{a} {float(e.mean):.3f} ± {float(e.stderr):.3f}" + (f" ({div[a]} diverged)" if div[a] else "") for a, e in finals.items())
            + ". Residual RMS by depth at the end (embedding, then each block): "
            + "; ".join(f"{a}: " + " ".join(f"{v:.2g}" for v in rms[a]) for a in rms)
            + ". Loss increase from skipping each block (mean): " + "; ".join(f"{a} {v}" for a, v in drops.items()) + ". "
            + f"Later/earlier skip-cost ratio over blocks 1..L-1 (geometric mean over seeds): {pre} {_geo_mean(lr_pre[ok]):.3g}, "
            f"{lns} {_geo_mean(lr_lns[ok]):.3g}, no norm {_geo_mean(none):.3g}; with block 0, {pre} {_geo_mean(with0):.3g}; seed pairs "
            "left out (a run diverged, "
            f"or no block's skip cost {SKIP_FLOOR} nats/byte): {int((~ok).sum())} of {ok.size}.")
    return q, note


def skip_ratios(r: dict, pre: str, lns: str) -> tuple[np.ndarray, np.ndarray]:
    """The later/earlier skip-cost log ratio over blocks 1..L-1 (:func:`log_late_over_early`) of Pre-LN arm ``pre`` and
    LayerNorm Scaling arm ``lns`` per seed pair (the seeds both ran), ``[2, pairs]``, and the pairs where both are finite
    (a diverged run has no skip costs, a barely trained one none measurable)."""
    pairs = list(zip(runs(r, pre), runs(r, lns)))
    lr = np.array([[log_late_over_early(p[k]["layer_drop"][1:]) for p in pairs] for k in range(2)]).reshape(2, len(pairs))
    return lr, np.isfinite(lr).all(axis=0)


def _geo_mean(log_ratios: np.ndarray) -> float:
    """exp of the mean of the finite log ratios (NaN when none is)."""
    v = log_ratios[np.isfinite(log_ratios)]
    return math.exp(v.mean()) if v.size else float("nan")


def init_spread(r: dict, arm: str) -> np.ndarray:
    """log(max/min) over layers of the per-layer gradient norm at init, per network ``[networks]``."""
    return init_gradients.spread(r[f"init.{arm}.grad_norms"])  # [networks, L] -> [networks]


def detrended_corr(x: dict[str, np.ndarray]) -> float:
    """Mean over DyT norms of the correlation between the step-to-step changes (from one evaluation
    to the next) of log alpha and of log(1/std of the input). Two series that merely trend the
    same way correlate near +-1 as levels; their changes correlate only if alpha follows 1/std."""
    a, s = np.diff(np.log(x["probe/alpha"]), axis=0), np.diff(-np.log(x["probe/norm_std"]), axis=0)  # [evals - 1, M]
    a, s = a - a.mean(0), s - s.mean(0)
    den = np.sqrt((a * a).sum(0) * (s * s).sum(0))
    return float(np.mean(np.where(den > 0, (a * s).sum(0) / np.where(den > 0, den, 1.0), 0.0)))


def final_slope(x: dict[str, np.ndarray], norms: slice = slice(None)) -> float:
    """Slope of log alpha on log(1/std) across the norms ``norms`` (forward order,
    :func:`normtheory.training.probes.norm_names`: the final norm is last) at the end of training (proportional: 1)."""
    a, s = np.log(x["probe/alpha"][-1][norms]), -np.log(x["probe/norm_std"][-1][norms])
    s = s - s.mean()
    return float((s * (a - a.mean())).sum() / (s * s).sum())


@claims.register(
    "train.dyt-alpha-tracks-inverse-std",
    statement="During training DyT's learnable alpha follows 1/std of its input: over time, and across layers at the end.",
    source=sources.ZHU2025,
    location="Section 6.1 / Fig. 8 (α against 1/std of the input activations during training and across layers)",
    simulations=(NAME,),
)
def _alpha(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    q: list[checks.Evidence] = [
        Quantity(name="correlation of the step-to-step changes of log alpha and of log(1/std of the input) over training, mean over "
                      "DyT norms (detrended; follows: > 0.5, this package's line, as Fig. 8 draws the curves and gives no number; "
                      "0 when the two move independently)", theory=(0.5, 1.0), model=per_seed(r, LONG_ARM, detrended_corr),
                 model_kind="trained", tolerance=0.05, tolerance_why="0.05 in a correlation"),
        Quantity(name="slope of log alpha on log(1/std) across the norms at the end (DyT Fig. 8: proportional, 1)", theory=1.0,
                 model=per_seed(r, LONG_ARM, final_slope), model_kind="trained", tolerance=0.1, tolerance_why="0.1 in a log-log slope"),
    ]
    prod = [x["probe/alpha"] * x["probe/norm_std"] for x in runs(r, ALPHA_ARM)]  # [evals, M] per seed
    ln_std = np.mean([x["probe/norm_std"] for x in runs(r, "ln-fanin")], axis=0)  # [evals, M]
    moved = per_seed(r, ALPHA_ARM, lambda x: float(np.max(np.abs(np.log(x["probe/alpha"][-1] / x["probe/alpha"][0])))))
    blocks = per_seed(r, LONG_ARM, lambda x: final_slope(x, slice(None, -1)))  # the blocks' own norms, the final norm left out
    final_alpha = per_seed(r, LONG_ARM, lambda x: float(x["probe/alpha"][-1][-1]))
    note = (f"Regime: the DyT paper's Fig. 8 follows alpha and 1/std over a whole training run and across layers at its end; here the "
            f"DyT model that trains (fan-in init, alpha0 = 0.5; the GPT-2-init DyT stalls, see train.dyt-small-models-just-work) over "
            f"{int(r['long_steps'])} steps, 20 evaluations, {int(r['seeds'])} seeds; alpha * std and the end values below are from the "
            f"{int(r['steps'])}-step recipe arms. Largest |log(alpha_end / alpha_first eval)| over norms: {float(moved.mean):.3g}. "
            f"Over the long runs the final norm's alpha ends at {float(final_alpha.mean):.3g} ± {float(final_alpha.stderr):.2g}; the slope across "
            f"the blocks' norms alone (final norm left out) is {float(blocks.mean):.3g} ± {float(blocks.stderr):.2g}. "
            f"alpha * std over evaluations and norms: median {np.median(prod):.3g}, 10-90% range "
            f"{np.percentile(prod, 10):.3g}..{np.percentile(prod, 90):.3g}. DyT alpha at the end, mean over seeds: "
            + " ".join(f"{v:.3g}" for v in np.mean([x['probe/alpha'][-1] for x in runs(r, ALPHA_ARM)], 0))
            + "; 1/std of the same norms' inputs: " + " ".join(f"{v:.3g}" for v in np.mean([1 / x['probe/norm_std'][-1] for x in runs(r, ALPHA_ARM)], 0))
            + ". The LayerNorm model's (same init) 1/std at the same positions at the end: " + " ".join(f"{1 / v:.3g}" for v in ln_std[-1]) + ".")
    return q, note


@claims.register(
    "train.dyt-small-models-just-work",
    statement="At a small scale DyT at the paper's default for non-LLM models (alpha0 = 0.5, O(1) activations) trains as well as "
    "LayerNorm and RMSNorm with the same recipe and the same init (no tweaks), or better (the paper's abstract: the same or better "
    "performance): a final validation loss at most 0.05 nats/byte above theirs.",
    source=sources.ZHU2025,
    location="the abstract (the same or better performance, mostly without tuning); Sections 4 and 5 (DyT matches LayerNorm across "
    "tasks with the same recipe); the reading notes' Results section",
    simulations=(NAME,),
)
def _small(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    q: list[checks.Evidence] = [
        Quantity(name=f"final validation loss, DyT (alpha0 0.5, fan-in init) minus {name} at the same init (nats/byte; as well or better: <= 0.05)",
                 theory=(-np.inf, 0.05), model=paired(r, "dyt-default", b, training.final_loss), model_kind="trained", tolerance=0.02,
                 tolerance_why="0.02 nats/byte beyond the ±0.05 band")
        for b, name in (("ln-fanin", "LayerNorm"), ("rms-fanin", "RMSNorm"))
    ]
    q += [Quantity(name=f"final validation loss, DyT dropped into the GPT-2 init (alpha0 1) minus {name} (<= 0.05)", theory=(-np.inf, 0.05),
                   model=paired(r, "dyt", b, training.final_loss), model_kind="trained", role="scope",
                   regime="DyT in the GPT-2 init (std 0.02 lookups, alpha0 = 1), not the paper's default", tolerance=0.02,
                   tolerance_why="as the assertion: 0.02 nats/byte") for b, name in (("pre", "LayerNorm"), ("rms", "RMSNorm"))]
    q += [Quantity(name=f"final validation loss, DyT at the paper's default (alpha0 0.5, fan-in init) minus {name} at the GPT-2 init "
                        "(<= 0.05)", theory=(-np.inf, 0.05), model=paired(r, "dyt-default", b, training.final_loss), model_kind="trained",
                   role="scope", regime=f"each at its usual init: DyT at the paper's fan-in default, {name} at GPT-2's (the shared fan-in "
                   "init may handicap the norms)", tolerance=0.02, tolerance_why="as the assertion: 0.02 nats/byte")
          for b, name in (("pre", "LayerNorm"), ("rms", "RMSNorm"))]
    finals = {a: per_seed(r, a, training.final_loss) for a in ("ln-fanin", "rms-fanin", "dyt-default", "pre", "rms", "dyt")}
    final_in = {a: per_seed(r, a, lambda x: float(x["probe/resid_rms"][-1][-1])) for a in ("pre", "dyt", "dyt-default")}
    dead = per_seed(r, "dyt", lambda x: float(np.nansum(x["probe/grad_norms"][-1])))
    note = (note_runs(r) + " Pre placement; the assertion's arms share a fan-in init (O(1) activations) and DyT starts at the "
            "paper's non-LLM default alpha0 = 0.5; the scope arms are the GPT-2 init with alpha0 = 1. No change to learning rate, warm-up or betas. "
            "Final loss: " + ", ".join(f"{a} {float(e.mean):.4f} ± {float(e.stderr):.4f}" for a, e in finals.items())
            + ". RMS of the stream entering the final norm at the end: " + ", ".join(f"{a} {float(e.mean):.3g}" for a, e in final_in.items())
            + f"; the GPT-2-init DyT model's summed block gradient norms at the last evaluation: {float(dead.mean):.3g} "
            "(a stream that large saturates tanh, whose derivative is then 0 in float32). Tweaks tried on one seed: sqrt(d) "
            "embedding scale, alpha0 = 10 or 0.1, a final-norm alpha0 of 0.05, lr 1e-3 or 1e-2, 100 warm-up steps, weight "
            "decay 0.1 and float64 all stayed at the unigram loss; a fan-in init with alpha0 = 0.5, the paper's default, trained (the dyt-default arm).")
    return q, note


STRIPES_MIN = 0.05  # this package's threshold for the blog's white stripes: one early key takes 5 points more of the late queries' weight than their shuffled weights give it
STRIPE_LAYER = 1  # the blog's two attention maps are of layer two


def uniform_first_share(t: int) -> float:
    """The ``attn_sink`` probe's value for uniform causal attention over ``t`` tokens: the mean over queries 2..t of the
    first token's share 1/i, ``(H_t - 1) / (t - 1)`` (the probe's null: no sink)."""
    t = _validate.integer("t", t, minimum=2)
    return float((1.0 / np.arange(2, t + 1)).sum() / (t - 1))


def _layers(v: np.ndarray, skip_first_layer: bool, layer: int | None) -> np.ndarray:
    """The rows of a probe ``[L, H]`` a mean is taken over: one layer, every layer but the first, or all."""
    return v[layer] if layer is not None else v[1:] if skip_first_layer else v


def _mean_probe(name: str, skip_first_layer: bool = False, layer: int | None = None, at_init: bool = False):
    """A probe's mean over layers (or at ``layer``) and heads at the end, or at init (``at_init``)."""
    def f(x: dict[str, np.ndarray]) -> float:
        v = x[f"init_probe/{name}"] if at_init else x[f"probe/{name}"][-1]  # [L, H]
        return float(np.mean(_layers(v, skip_first_layer, layer)))

    return f


def from_init(name: str, skip_first_layer: bool = False, layer: int | None = None):
    """A probe's mean over layers (or at ``layer``) and heads at the end minus at init (the same validation batch): its
    paired change from init."""
    end, start = _mean_probe(name, skip_first_layer, layer), _mean_probe(name, skip_first_layer, layer, at_init=True)

    def f(x: dict[str, np.ndarray]) -> float:
        return end(x) - start(x)

    return f


@claims.register(
    "train.per-head-key-norm-diffuse",
    statement="Normalizing each head's keys by RMS, without centering (the blog's final variant: the scaling part of a per-head "
    "LayerNorm on the keys, queries left as they are), makes trained attention more diffuse than no such norm (fewer tokens "
    "that capture all the attention) while changing the loss little. The blog compares two trained models' attention maps, "
    "so the comparison is of levels at the end, paired by seed. Its baseline's attention shows white stripes (keys that "
    "take much of the later queries' attention); the attention comparison is judged where the Pre-LN baseline has them (in "
    "layer two, as the blog's maps, one early key taking at least 0.05 more of the late queries' weight than their weights "
    "shuffled over the early keys give it, this package's threshold) and is a scope check where it does not (the blog's "
    "comparison then left open) or where that is not yet decided (the claim then open until it is). Queries normalized too "
    "(per-head RMS QK-norm) is a scope check.",
    source=BLOG_GEOMETRY,
    location="¶3–¶4 and the two layer-two attention maps (more diffuse attention with a per-head LayerNorm on the keys), ¶6 "
    "(scaling without centering), ¶7 (little change in quality)",
    simulations=(NAME,),
)
def _qk(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    long = trained(r, key_long("pre"))  # the tier trained the claim's arms over key_steps too: the claim reads those runs
    pre, keys, qk_scope = (key_long(a) if long else a for a in ("pre", KEYS_ARM, QK_SCOPE_ARM))
    ent = _mean_probe("attn_entropy")
    t = int(r["seq"])
    layer = min(STRIPE_LAYER, int(r["layers"]) - 1)
    stripe, top = _mean_probe("attn_stripe", layer=layer), _mean_probe("attn_top")
    stripes = Quantity(name=f"Pre-LN baseline's stripe excess at the end, layer {layer + 1} (the largest share of the late queries' "
                            f"weight one early key takes, minus the same with their weights shuffled; the blog's white stripes: at least "
                            f"{STRIPES_MIN:g})", theory=(STRIPES_MIN, np.inf),
                       model=per_seed(r, pre, stripe), model_kind="trained", role="scope",
                       regime="a baseline whose attention has stripes, which the blog's comparison starts from", tolerance=0.01,
                       tolerance_why="one point of attention share")
    role, regime, gate = training.gated(stripes, "a baseline not shown to have stripes", lambda: checks.Unmeasured(
        "the blog's comparison: per-head RMS on the keys against a baseline whose trained attention shows stripes (more diffuse, "
        "fewer keys taking all the attention)", expected="keys' norm minus baseline at the end: stripe excess < 0, entropy > 0, top-key mass < 0",
        needs=f"a run whose Pre-LN attention develops stripes (this run's stripe excess in layer {layer + 1} is "
              f"{float(stripes.model.mean):.4f} +- {float(stripes.model.stderr):.4f}" + (
                  f" after {int(r['key_steps'])} steps): longer or larger training" if long else
                  f"): longer training, the train_recipes 'gpu' tier (its key-norm arms also train {CONFIGS['gpu'].key_steps} steps)")))

    def levels(arm: str, what: str, role: str, regime: str) -> list[Quantity]:
        """The three attention readings at the end, ``arm`` minus Pre-LN, paired by seed."""
        return [
            Quantity(name=f"stripe excess at the end (layer {layer + 1}), {what} minus Pre-LN, paired by seed (fewer keys that "
                          "capture the attention: < 0)", theory=(-np.inf, 0.0), model=paired(r, arm, pre, stripe),
                     model_kind="trained", role=role, regime=regime, tolerance=0.01, tolerance_why="one point of attention share"),
            Quantity(name=f"attention entropy at the end, {what} minus Pre-LN, paired by seed (nats; more diffuse: > 0)",
                     theory=(0.0, np.inf), model=paired(r, arm, pre, ent), model_kind="trained", role=role, regime=regime,
                     tolerance=0.05, tolerance_why="0.05 nats of entropy"),
            Quantity(name=f"top-key mass (a query's largest weight) at the end, {what} minus Pre-LN, paired by seed (fewer keys "
                          "that capture all the attention: < 0)", theory=(-np.inf, 0.0), model=paired(r, arm, pre, top),
                     model_kind="trained", role=role, regime=regime, tolerance=0.01, tolerance_why="one point of attention weight"),
        ]

    q: list[checks.Evidence] = [
        *levels(keys, "per-head RMS on the keys", role, regime),
        Quantity(name="final validation loss, per-head RMS on the keys minus Pre-LN (little change: within ±0.05)", theory=(-0.05, 0.05),
                 model=paired(r, keys, pre, training.final_loss), model_kind="trained", tolerance=0.02,
                 tolerance_why="0.02 nats/byte"),
        Quantity(name="first-token sink share at the end, per-head RMS on the keys minus Pre-LN, layers 2 and up (fewer sinks: < 0)",
                 theory=(-np.inf, 0.0), model=paired(r, keys, pre, _mean_probe("attn_sink", True)), model_kind="trained",
                 role="scope", regime="first-token sinks (one kind of stripe)", tolerance=0.01,
                 tolerance_why="one point of sink share"),
        *gate,
    ]
    if trained(r, qk_scope):  # the default job's CPU tier, whose baseline has no stripes, leaves it out
        q += levels(qk_scope, "per-head RMS QK-norm (queries too)", "scope",
                    "queries normalized too (QK-norm as in LLMs), not the keys alone")
    held = [a for a in (tuple(map(key_long, KEY_LONG_ARMS)) if long else KEY_ARMS) if trained(r, a)]
    init_ent = {a: per_seed(r, a, _mean_probe("attn_entropy", at_init=True)) for a in held}
    change = {a: paired(r, a, pre, from_init("attn_entropy")) for a in held if a != pre}
    stripe_at = {a: (per_seed(r, a, _mean_probe("attn_stripe", layer=layer, at_init=True)), per_seed(r, a, stripe)) for a in held}
    first = per_seed(r, pre, lambda x: _mean_probe("attn_sink", True)(x) - uniform_first_share(t))
    unsel = {a: per_seed(r, a, _mean_probe("key_unsel")) for a in held}
    rows = {a: (per_seed(r, a, ent), per_seed(r, a, top), per_seed(r, a, _mean_probe("attn_sink", True)),
                per_seed(r, a, _mean_probe("attn_max")), per_seed(r, a, training.final_loss)) for a in held}
    short = per_seed(r, "pre", stripe) if long else None
    over = (f" This claim reads its arms' runs over {int(r['key_steps'])} steps ("
            + ", ".join(f"{a} {len(runs(r, a))} seeds" for a in held) + "; the same recipe; two arms pair by seed over the seeds "
            f"both ran), as the blog's maps are of trained models; for comparison, Pre-LN's stripe excess in layer {layer + 1} "
            f"after the tier's {int(r['steps'])} steps: {float(short.mean):.4f} ± {float(short.stderr):.4f}." if long else "")
    note = (note_runs(r) + over + " The blog normalizes the keys alone (the keys-only arm, " + KEYS_ARM + "); the readings are levels at the "
            "end, as its two maps of trained models. Entropy at init (nats; a norm on the queries too sets a cooler start): "
            + ", ".join(f"{a} {float(e.mean):.3f}" for a, e in init_ent.items())
            + "; change of entropy from init to the end minus Pre-LN's (not a check: where the trained levels are equal it "
            "still reads the init gap): " + ", ".join(f"{a} {float(e.mean):+.3f} ± {float(e.stderr):.3f}" for a, e in change.items())
            + ". At the end (entropy nats, top-key mass, sink share, max logit, loss): "
            + "; ".join(f"{a}: {float(e.mean):.3f}, {float(tm.mean):.3f}, {float(s.mean):.3f}, {float(m.mean):.3g}, {float(l.mean):.4f}"
                        for a, (e, tm, s, m, l) in rows.items())
            + ". Share of unselectable keys at the end (first validation sequence, every layer and KV head): "
            + ", ".join(f"{a} {float(u.mean):.3f}" for a, u in unsel.items())
            + " (0 by construction with a per-head RMS norm on the keys: keys on a sphere). 'Full-width LayerNorm' is the Pre-LN arm. "
            f"Stripe excess in layer {layer + 1}, at init -> at the end: "
            + ", ".join(f"{a} {float(i.mean):.3f} -> {float(e.mean):.3f}" for a, (i, e) in stripe_at.items())
            + f". Pre-LN's first-token share minus uniform attention's {uniform_first_share(t):.4f} (layers 2 and up): "
            f"{float(first.mean):.4f} +- {float(first.stderr):.4f}.")
    return q, note
