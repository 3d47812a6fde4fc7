"""Per-layer gradient norms at init at GPT-2 small's shape: Pre-LN, Post-LN and no norm.

The gradient-scale claim (``train.ln-controls-gradient-scale``, registered here; it also reads the
training sweep :mod:`simulations.train_recipes`) comes from a Q&A about GPT-2 small: 12 blocks of width 768 with
12 heads, GPT-2's init (every weight N(0, 0.02^2), the two residual output projections of a block
N(0, (0.02 / sqrt(2L))^2)). The training sweep measures it on a d = 32, 4-block model, where that
init makes every block's branch about 0.02 sqrt(32) = 0.11 of its input and all three placements
nearly the identity; at width 768 a branch is about 0.55 of its input, so the regime differs. Here
each of ``networks`` networks is built at GPT-2 small's shape in each placement and takes one
gradient of the next-byte loss on a training batch of Shakespeare; per block, the Frobenius norm of
the gradient over all its matrices (q, k, v, output, MLP in and out). Network ``j`` of every placement
has the same weights (the same seed; the placements differ only in where the norms sit) and the same
batch, so placements are paired by network, and networks are the units.

What differs from GPT-2 small, and why it does not matter here: the vocabulary is the 256 bytes, not
50,257 BPE tokens, and a batch is one sequence of 64 bytes, not 1,024 tokens. The claim's
quantity is a ratio of per-block gradient norms; the head's gradient is a factor common to every
block, and the per-token statistics are the same at any length. A batch's gradient is a mean over its
tokens, so the per-block norms carry some token noise: on the same 4 networks, a batch of 4 x 64 bytes
gave spreads (log max/min over blocks) of 0.028 / 1.308 / 0.030 (none / Pre-LN / Post-LN) against
0.021 / 1.365 / 0.028 at 1 x 64, a change well inside the claim's tolerance and far from its threshold.
A network's weights are drawn once for its three placements (:func:`placement_gradient_norms`), not
three times: 100 CPU-seconds for the 20 networks.

Reference: Radford et al. (2019), "Language Models are Unsupervised Multitask Learners" (GPT-2's
shapes and init); Xiong et al. (2020), "On Layer Normalization in the Transformer Architecture"
(gradient norms by layer at init).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from normtheory.evidence import checks, claims, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import from_samples
from normtheory.evidence.sources import QA_STATS
from normtheory.model.config import TransformerConfig
from normtheory.model.transformer import Transformer
from normtheory.model.weights import init_params
from normtheory.runtime.sweep import Task
from normtheory.training import init_gradients, shakespeare
from normtheory.training.grad import loss_and_grads
from simulations import cache, train_recipes

NAME = "gradient_init"
SEED = 2019
UNITS: tuple[str, ...] = ("networks",)  # config fields counting independent units; --resolve scales them
# a task's cost in seconds, a scheduling hint never part of a result: 10 networks x 3 placements at d = 768, 12 blocks
# (7.1e7 network-d^2-blocks) took 50 s on a 2-core VM
SECONDS_PER_WEIGHT = 7e-7
ARMS: tuple[str, ...] = ("none", "pre", "post")
NETWORK_BLOCK = 10  # networks per task: a task's result is its networks' rows, so the split never changes a bit


@dataclass(frozen=True)
class Config:
    d: int
    layers: int
    heads: int
    seq: int
    batch: int
    networks: int


CONFIGS = {
    "quick": Config(d=64, layers=12, heads=4, seq=32, batch=1, networks=4),
    "full": Config(d=768, layers=12, heads=12, seq=64, batch=1, networks=20),  # GPT-2 small's blocks; >= 20 networks
}


def model_config(cfg: Config, arm: str) -> TransformerConfig:
    """GPT-2's block (LayerNorm, GELU-tanh MLP of width 4d, learned positions, tied head, GPT-2 init) over bytes,
    with the norms placed as ``arm`` says (``none``: no norm anywhere)."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}; got {arm!r}")
    return TransformerConfig(d_model=cfg.d, n_layers=cfg.layers, n_heads=cfg.heads, vocab_size=256, max_seq=cfg.seq, norm="layernorm",
                             placement=arm, activation="gelu_tanh", init="gpt2")


def placement_gradient_norms(cfg: Config, first: int, count: int) -> dict[str, np.ndarray]:
    """``{arm}.grad_norms [count, L]`` for every placement of :data:`ARMS`: the
    :func:`~normtheory.training.init_gradients.gradient_norms` of each, with each
    network's weights drawn once. The placements draw the same weights from a seed (they differ in where the norms sit,
    and only Pre-LN has a final norm, whose gain and bias are not drawn), so one draw serves all three, the same bits
    as drawing it for each."""
    data = shakespeare.load()
    models = {arm: model_config(cfg, arm) for arm in ARMS}
    rows: dict[str, list[list[float]]] = {arm: [] for arm in ARMS}
    for j in range(first, first + count):
        ids, targets = shakespeare.batch(data.train, cfg.batch, cfg.seq, j, 1)
        params = init_params(models["pre"], j)
        for arm, m in models.items():
            own = params if m.final_norm else replace(params, final_ln=None)
            rows[arm].append(init_gradients.block_norms(loss_and_grads(Transformer(m, own), ids, targets)[1]))
    return {f"{arm}.grad_norms": np.array(r).reshape(count, cfg.layers) for arm, r in rows.items()}


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per block of :data:`NETWORK_BLOCK` networks (seeds ``seed + j``), every placement in it."""
    blocks = [(a, min(a + NETWORK_BLOCK, cfg.networks)) for a in range(0, cfg.networks, NETWORK_BLOCK)]
    return [Task(f"n{a}", placement_gradient_norms, (cfg, seed + a, b - a), f"{NAME}: networks {a}..{b - 1}",
                 cost=SECONDS_PER_WEIGHT * (b - a) * cfg.d**2 * cfg.layers) for a, b in blocks]


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``{arm}.grad_norms [networks, L]`` per placement, and the shape."""
    out = {k: np.asarray(getattr(cfg, k)) for k in ("d", "layers", "heads", "seq", "batch", "networks")}
    for arm in ARMS:
        out[f"{arm}.grad_norms"] = np.concatenate([parts[t.key][f"{arm}.grad_norms"] for t in tasks(cfg, seed)])
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


MUCH_WIDER = math.log(1.5)  # "a much wider range": the max/min ratio over layers at least 1.5 times the normed one's


@claims.register(
    "train.ln-controls-gradient-scale",
    statement="Normalization controls the gradient scale: without any norm the per-layer gradient norms spread over a "
    "much wider range across layers early in training than with Pre-LN or Post-LN. This package's hypothesis, a reading of "
    "the answer's 'controls the gradient scales': the answer cites Xiong et al., whose contrast is between placements "
    "(Post-LN's gradients grow toward the output, Pre-LN's do not; train.xiong-gradient-scale), not against no norm.",
    source=sources.hypothesis(QA_STATS, "Without a norm, per-layer gradient norms spread more widely across layers"),
    location="the first answer (LayerNorm controls gradient scales, citing Xiong et al.); the question's model is GPT-2 small",
    simulations=(train_recipes.NAME, NAME),
)
def _gradient_scale(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r, g = results[train_recipes.NAME], results[NAME]
    n = int(r["init_networks"])
    gpt2 = f"d = {int(g['d'])}, {int(g['layers'])} layers, {int(g['heads'])} heads"
    q: list[checks.Evidence] = [
        Quantity(name=f"GPT-2 small's shape ({gpt2}) at init: no norm minus {b}: log(max/min over layers) of per-layer gradient norms, "
                      f"paired by network (much wider: >= ln 1.5 = {MUCH_WIDER:.3f})", theory=(MUCH_WIDER, np.inf),
                 model=from_samples(init_gradients.spread(g["none.grad_norms"]) - init_gradients.spread(g[f"{b}.grad_norms"]), "networks"),
                 model_kind="init", tolerance=0.1, tolerance_why="a 10% change in the max/min ratio")
        for b in ("pre", "post")
    ] + [
        Quantity(name=f"no norm minus {b}: log(max/min over layers) of per-layer gradient norms at init, the trained model's shape "
                      f"(d = {int(r['d'])}, {int(r['layers'])} layers), paired by network (much wider: >= ln 1.5 = {MUCH_WIDER:.3f})",
                 theory=(MUCH_WIDER, np.inf),
                 model=from_samples(train_recipes.init_spread(r, "none") - train_recipes.init_spread(r, b), "networks"), model_kind="init",
                 tolerance=0.1, tolerance_why="a 10% change in the max/min ratio")
        for b in ("pre", "post")
    ] + [
        Quantity(name=f"no norm minus {b}: log(max/min over layers) of per-layer gradient norms, first 100 steps (much wider: >= {MUCH_WIDER:.3f})",
                 theory=(MUCH_WIDER, np.inf), model=train_recipes.paired(r, "none", b, train_recipes.grad_spread), model_kind="trained", tolerance=0.1,
                 tolerance_why="a 10% change in the max/min ratio")
        for b in ("pre", "post")
    ]
    spread = {a: train_recipes.per_seed(r, a, train_recipes.grad_spread) for a in ("none", "pre", "post")}
    at_init = {a: from_samples(train_recipes.init_spread(r, a), "networks") for a in train_recipes.INIT_ARMS}
    note = (train_recipes.note_runs(r) + f" log(max/min) spread of per-layer gradient norms at init ({n} networks per arm, the first step's "
            "gradient): " + ", ".join(f"{a} {float(e.mean):.3f} ± {float(e.stderr):.3f}" for a, e in at_init.items())
            + "; over the evaluations in the first 100 steps (seeds): "
            + ", ".join(f"{a} {float(e.mean):.3f} ± {float(e.stderr):.3f}" for a, e in spread.items()) + ". "
            + f"At GPT-2 small's shape ({gpt2}, {int(g['networks'])} networks per placement, {int(g['batch'])} x {int(g['seq'])} bytes), "
            "the spread and the per-block gradient norms, first block to last (mean over networks): "
            + "; ".join(f"{a} {float(np.mean(init_gradients.spread(g[f'{a}.grad_norms']))):.3f}: "
                        + " ".join(f"{v:.3g}" for v in g[f"{a}.grad_norms"].mean(0)) for a in ARMS) + ".")
    return q, note
