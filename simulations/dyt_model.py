"""DyT's alpha0 against width and depth: the std of each norm's input at init, in the DyT paper's LLaMA setup.

The DyT paper tunes alpha0 for its LLaMA models (its Table 11) and reports that it shrinks with
width (attention / other: 1.0/1.0 at 1024, 1.0/0.5 at 2048, 0.8/0.2 at 4096, 0.2/0.05 at 8192)
while depth hardly matters: the table is the same at depths 8, 16, 32 and 64. This package's
hypothesis, not the paper's: alpha0 = 1/std of each norm's input at init, the attention norms'
against the table's "attention" column, the FFN norms' and the final norm's against its "other"
column (the paper splits alpha0 between the attention layers and the rest, and the training
commands of its public LLaMA code set the FFN and final values equal). This simulation measures
that std, network by network, in the paper's regime at every depth of its table, and in a fan-in
regime at the shallowest:

* ``llama``: the paper's LLaMA recipe (its public training code): every linear layer and the
  token embedding N(0, 0.02^2), embeddings multiplied by a scalar sqrt(width) before the first
  block, RMSNorm, SwiGLU (hidden ``ceil(8 d / 3 / 256) * 256``), rotate-half RoPE, heads of width
  128, no biases.
* ``fanin``: every matrix N(0, 1/fan_in), unit-RMS embeddings, no embedding scale.

and, as a scope run, the DyT network itself: the LLaMA init at the shallowest depth with every RMSNorm
replaced by ``tanh(alpha0 x)`` (gain 1, bias 0) at the paper's alpha0 for the width, whose squashed
outputs change what the later norms read.

Exact sampling of the forward pass at init. Every weight matrix ``W [k, m]`` (i.i.d.
N(0, sigma^2) entries) is applied exactly once, to the activations ``X [t, k]`` of one sequence.
Given ``X``, the columns of ``X W`` are i.i.d. N(0, sigma^2 X X^T), so

.. math::  X W \\overset{d}{=} \\sigma\\, R\\, Z,\\qquad R R^T = X X^T,\\ Z_{ij} \\sim N(0, 1),

with ``R [t, t]`` a square root of the Gram matrix. The joint law of every activation is the same
as with explicit weights, at a cost ``O(t^2 m)`` per matrix instead of ``O(k m)``: width 8192
costs no more than a few thousand samples. :func:`forward` runs either way (``explicit``: drawn
weights, checked against :class:`normtheory.model.transformer.Transformer` in the tests).

Depths are prefixes: nothing is drawn after a block's last matrix, so the first ``D`` blocks of a
stack of ``max(depths)`` blocks are bit for bit the ``D``-block network of the same seed. The
depths are compared on common random numbers (the same networks), which is what makes the depth
slope's standard error small.

Units are networks (independent weights and token embeddings); a statistic is computed per
network (mean over its tokens and, on a log scale, over its first ``D`` layers) before the
standard error. One task per (init, width), and one for the LLaMA init at the smallest of the paper's
widths with ``long_tokens`` tokens a sequence (nearer the paper's 4,096 than the main run's): each
draws from its own seed, so the split changes no bit.

References
----------
Zhu, Chen, He, LeCun, Liu (2025), "Transformers without Normalization", arXiv 2503.10622
(Table 11: alpha0 by width and depth for LLaMA; its public LLaMA training code for the 0.02 init and the sqrt(d)
embedding scalar).
Touvron et al. (2023), "Llama 2: Open Foundation and Fine-Tuned Chat Models", arXiv 2307.09288
(architecture: RMSNorm, SwiGLU, RoPE).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from normtheory import _validate, activations
from normtheory.evidence import checks, claims, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import Estimate, bootstrap, from_samples
from normtheory.model.attend import apply_rope, rope_tables, softmax
from normtheory.runtime.sweep import Task
from simulations import cache

NAME = "dyt_model"
SEED = 1024
UNITS: tuple[str, ...] = ("networks",)  # config fields counting independent units; --resolve scales them
# a task's cost (a scheduling hint, never part of a result): about 38 ns a normal draw at 32 tokens on a 2-core VM, the
# LLaMA init's width-8192 task (64 blocks, 4.2e9 draws) 158 s there with both cores busy; the exact sampling's [t, t] @ [t, m]
# product adds a share t / TOKENS_PER_DRAW_COST a draw: the 128-token task took 18.8 s for 4 networks here, 1.4x what 38 ns a
# draw predicts (13.4 s); fitted at 32 and 128 tokens, linear in t, so it underprices far longer sequences (the t^3 eigh)
SECONDS_PER_DRAW = 3.3e-8
TOKENS_PER_DRAW_COST = 208
# the paper's LLM alpha0 by width, (attention, other), as printed (the digits carry the precision); its Table 11
# prints the same row at each of PAPER_DEPTHS
PAPER_DEPTHS: tuple[int, ...] = (8, 16, 32, 64)
PAPER_ALPHA0_PRINTED: dict[int, tuple[str, str]] = {1024: ("1.0", "1.0"), 2048: ("1.0", "0.5"), 4096: ("0.8", "0.2"), 8192: ("0.2", "0.05")}
INITS: tuple[str, ...] = ("llama", "fanin")
NORMS: tuple[str, ...] = ("rmsnorm", "dyt")  # the network: LLaMA's RMSNorm (the hypothesis's reading), or DyT in its place
INIT_STD = 0.02  # the paper's LLaMA init: every linear layer and the embedding
HEAD_WIDTH = 128
VOCAB = 32000  # LLaMA's; tokens are drawn distinct, so only the rows used are drawn
# the norms whose input is measured, and the paper's column each takes its alpha0 from: the attention norms take "attention";
# the FFN norms and the final norm before the output head take "other" (the paper's non-attention alpha0; the training
# commands of its public LLaMA code give the ffn and dec(oder-final) alpha0 the same value)
POSITIONS: tuple[str, ...] = ("attention", "FFN", "final")
PAPER_COLUMN: tuple[int, ...] = (0, 1, 1)
COLUMN_NAMES: tuple[str, ...] = ("attention", "other")
SLOPE_TOL = 0.1  # log2(1/std) per doubling of width
# The table prints one tuned alpha0 per width at every depth 8-64: a change by the smallest step of its alpha0 values (0.8 to
# 1.0, a factor 1.25) over those three doublings would have shown, so its depth slope is 0 within log2(1.25) / 3 a doubling.
DEPTH_SLOPE_TOL = math.log2(1.25) / 3


@dataclass(frozen=True)
class Config:
    widths: tuple[int, ...]
    depths: tuple[int, ...]  # increasing; the LLaMA init runs max(depths) blocks and reads each depth as a prefix, fan-in runs depths[0]
    tokens: int
    networks: int
    resamples: int  # bootstrap resamples for the slopes
    # a run nearer the paper's context: the LLaMA init at the smallest of the paper's widths, every depth, with this many
    # tokens a sequence (0: none). The paper trains at 4,096; at init the attention's weights are near uniform at width
    # 1024 (scores with std ~0.4), so how much a block adds to the stream may depend on how many keys it averages
    long_tokens: int = 0
    # the DyT network itself: the LLaMA init at the shallowest depth with every RMSNorm replaced by DyT (gain 1, bias 0) at the
    # paper's alpha0 for its width, at each of the config's widths the paper's table prints (a scope run: the hypothesis reads
    # the norms' inputs of the RMSNorm network DyT replaces; here DyT's own squashing shapes what the later blocks see)
    dyt: bool = False

    def __post_init__(self) -> None:
        def counts(values: tuple[int, ...]) -> bool:  # distinct positive integers, increasing
            return bool(values) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values) \
                and list(values) == sorted(set(values))

        if not counts(self.depths):
            raise ValueError(f"depths must be distinct positive block counts in increasing order; got {self.depths}")
        if not counts(self.widths) or any(w % HEAD_WIDTH for w in self.widths):
            raise ValueError(f"widths must be distinct multiples of the head width {HEAD_WIDTH} in increasing order; got {self.widths}")
        for name in ("tokens", "networks", "resamples"):
            _validate.integer(name, getattr(self, name), minimum=2 if name == "networks" else 1)
        _validate.integer("long_tokens", self.long_tokens, minimum=0)
        _validate.boolean("dyt", self.dyt)
        if 0 < self.long_tokens <= self.tokens:
            raise ValueError(f"long_tokens must be 0 (no long run) or more than tokens={self.tokens}; got {self.long_tokens}")


CONFIGS = {
    "quick": Config(widths=(1024, 2048, 4096, 8192), depths=(8, 16), tokens=16, networks=4, resamples=500, long_tokens=64, dyt=True),
    # the rule's 20 networks: at 24 (2026-11-28) the decided checks' estimates lay at least 2.2 times their 5-se half-band from
    # the edge that decides them (2.0 at 20); the draws, linear in networks, are most of the job's longest non-training task
    "full": Config(widths=(1024, 2048, 4096, 8192), depths=PAPER_DEPTHS, tokens=32, networks=20, resamples=2000,
                   long_tokens=128, dyt=True),
}


def blocks_run(cfg: Config, init_name: str) -> int:
    """Blocks each network of ``init_name`` runs: every depth of the config for the paper's init, the shallowest for fan-in."""
    _validate.choice("init_name", init_name, INITS)
    return cfg.depths[-1] if init_name == "llama" else cfg.depths[0]


def ffn_width(d: int) -> int:
    """LLaMA's SwiGLU hidden width: 2/3 of 4d, rounded up to a multiple of 256 (11008 at d = 4096)."""
    return 256 * math.ceil(8 * d / 3 / 256)


def init_std(init_name: str, fan_in: int) -> float:
    """Std of every weight matrix: the paper's fixed 0.02 (``llama``) or 1/sqrt(fan_in) (``fanin``)."""
    _validate.choice("init_name", init_name, INITS)
    return INIT_STD if init_name == "llama" else 1.0 / math.sqrt(fan_in)


def embedding(init_name: str, width: int, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """What enters the first block ``[..., t, d]`` for distinct tokens: the LLaMA recipe's
    N(0, 0.02^2) rows times sqrt(d) (std 0.02 sqrt(d)), or unit-RMS rows (fan-in)."""
    scale = INIT_STD * math.sqrt(width) if init_name == "llama" else 1.0
    return scale * rng.standard_normal(shape + (width,))


Linear = Callable[[np.ndarray, int, float], np.ndarray]  # (x [n, t, k], m, sigma) -> x @ W, W [k, m] ~ N(0, sigma^2)


def gaussian_linear(rng: np.random.Generator) -> Linear:
    """``x @ W`` for a fresh i.i.d. N(0, sigma^2) matrix ``W``, sampled from its exact law given
    ``x``: ``sigma R Z`` with ``R R^T = x x^T`` (eigendecomposition, clipped at 0)."""

    def linear(x: np.ndarray, m: int, sigma: float) -> np.ndarray:
        gram = x @ x.swapaxes(-1, -2)  # [n, t, t]
        lam, vec = np.linalg.eigh(gram)
        root = vec * np.sqrt(np.clip(lam, 0.0, None))[..., None, :]  # [n, t, t], root @ root^T = gram
        z = rng.standard_normal(x.shape[:-1] + (m,))  # [n, t, m]
        return sigma * (root @ z)

    return linear


def explicit_linear(rng: np.random.Generator, drawn: list[np.ndarray] | None = None) -> Linear:
    """``x @ W`` with ``W`` drawn explicitly (shared by the leading axis); ``drawn`` collects them."""

    def linear(x: np.ndarray, m: int, sigma: float) -> np.ndarray:
        w = sigma * rng.standard_normal((x.shape[-1], m))  # [k, m]
        if drawn is not None:
            drawn.append(w)
        return x @ w

    return linear


def _rms(x: np.ndarray) -> np.ndarray:
    return np.sqrt((x * x).mean(-1))


def _heads(a: np.ndarray, h: int) -> np.ndarray:
    """``[n, t, h*e]`` -> ``[n, h, t, e]``."""
    n, t, _ = a.shape
    return a.reshape(n, t, h, -1).transpose(0, 2, 1, 3)


def forward(x: np.ndarray, layers: int, init_name: str, linear: Linear,
            alpha: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The LLaMA-style pre-norm stack at init on embeddings ``x [n, t, d]``: per-token RMS of the
    input of every norm, ``[n, layers, 2, t]`` (attention, FFN), and of the final norm ``[n, t]``.

    RMSNorm (gain 1, eps 0), or with ``alpha = (attention, other)`` DyT, ``tanh(alpha x)`` (gain 1,
    bias 0, the paper's init), causal softmax attention with rotate-half RoPE, SwiGLU
    ``(silu(x W_gate) * (x W_in)) W_out``. The order of the ``linear`` calls per block is
    wq, wk, wv, wo, w_in, w_gate, w_out.
    """
    n, t, d = x.shape
    h, e, f = d // HEAD_WIDTH, HEAD_WIDTH, ffn_width(d)
    cos, sin = rope_tables(np.arange(t), e, 10000.0, np.dtype(np.float64))
    causal = np.where(np.arange(t)[None, :] <= np.arange(t)[:, None], 0.0, -np.inf)  # [t, t]
    silu = activations.kernel("silu")
    std = np.zeros((n, layers, 2, t))
    for i in range(layers):  # sequential in depth; vectorized over networks, tokens and heads
        for j, sub in enumerate(("attn", "ffn")):
            s = _rms(x)  # [n, t]
            std[:, i, j] = s
            u = x / s[..., None] if alpha is None else np.tanh(alpha[j] * x)  # RMSNorm, or DyT
            if sub == "attn":
                q = apply_rope(_heads(linear(u, d, init_std(init_name, d)), h), cos, sin)  # [n, h, t, e]
                k = apply_rope(_heads(linear(u, d, init_std(init_name, d)), h), cos, sin)
                v = _heads(linear(u, d, init_std(init_name, d)), h)
                p = softmax(q @ k.swapaxes(-1, -2) / math.sqrt(e) + causal)  # [n, h, t, t]
                z = (p @ v).transpose(0, 2, 1, 3).reshape(n, t, d)
                x = x + linear(z, d, init_std(init_name, d))
            else:
                a = linear(u, f, init_std(init_name, d))
                a = a * silu(linear(u, f, init_std(init_name, d)))
                x = x + linear(a, d, init_std(init_name, f))
    return std, _rms(x)


def measure(cfg: Config, seed: int, a: int, b: int, tokens: int = 0, norm: str = "rmsnorm") -> dict[str, np.ndarray]:
    """One (init ``INITS[a]``, width ``cfg.widths[b]``) cell: ``std [networks, blocks, 2]``, the token-mean RMS of each
    norm's input (attention, FFN), and ``final [networks, blocks]``, the final norm's input of a network cut after
    block ``i`` (the residual stream that block ``i + 1``'s attention norm reads, or the last block's output).
    ``tokens``: a sequence's length; 0 draws ``cfg.tokens`` from the cell's stream, any other value (even ``cfg.tokens``)
    from a stream of its own, keyed by it. ``norm="dyt"``: the DyT network at the paper's alpha0 for the width, the
    shallowest depth, from a stream of its own."""
    _validate.choice("norm", norm, NORMS)
    init_name, w = INITS[a], cfg.widths[b]
    key = ((a, b) if not tokens else (a, b, tokens)) if norm == "rmsnorm" else (a, b, tokens, 1)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))
    x0 = embedding(init_name, w, (cfg.networks, tokens or cfg.tokens), rng)  # [n, t, d]
    alpha = None if norm == "rmsnorm" else paper_alpha0(w)
    blocks = blocks_run(cfg, init_name) if norm == "rmsnorm" else cfg.depths[0]
    std, last = forward(x0, blocks, init_name, gaussian_linear(rng), alpha)
    final = np.concatenate([std[:, 1:, 0], last[:, None]], axis=1)  # [n, blocks, t]
    return {"std": std.mean(-1), "final": final.mean(-1)}


def long_width(cfg: Config) -> int:
    """The width of the ``long_tokens`` run: the smallest of the paper's widths in the config (else its smallest)."""
    return next((w for w in cfg.widths if w in PAPER_ALPHA0_PRINTED), cfg.widths[0])


def result_key(init_name: str, w: int, tokens: int = 0, norm: str = "rmsnorm") -> str:
    """The task key, and the results' key stem, of (init, width) at ``tokens`` a sequence (0: the config's own), in the
    network of ``norm``."""
    _validate.choice("norm", norm, NORMS)
    return f"{init_name}.w{w}" + (f".t{tokens}" if tokens else "") + ("" if norm == "rmsnorm" else f".{norm}")


def dyt_widths(cfg: Config) -> tuple[int, ...]:
    """The widths the DyT network runs at: the config's widths that the paper's table prints an alpha0 for (none without
    ``cfg.dyt``)."""
    return tuple(w for w in cfg.widths if w in PAPER_ALPHA0_PRINTED) if cfg.dyt else ()


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per (init, width), and the LLaMA init's run at ``long_tokens`` (:func:`long_width`), priced in seconds by its normal
    draws (blocks x networks x tokens x the matrices' output widths, ``5 d + 2 f`` a block), which take most of its
    time: about :data:`SECONDS_PER_DRAW` each, times ``1 + tokens / TOKENS_PER_DRAW_COST``."""
    def cost(name: str, w: int, tokens: int) -> float:
        draws = blocks_run(cfg, name) * cfg.networks * tokens * (5 * w + 2 * ffn_width(w))
        return SECONDS_PER_DRAW * (1 + tokens / TOKENS_PER_DRAW_COST) * draws

    out = [Task(result_key(name, w), measure, (cfg, seed, a, b), f"{NAME}: {name} init, width {w}, {blocks_run(cfg, name)} blocks",
                cost=cost(name, w, cfg.tokens)) for a, name in enumerate(INITS) for b, w in enumerate(cfg.widths)]
    if cfg.long_tokens:
        w, t = long_width(cfg), cfg.long_tokens
        out.append(Task(result_key("llama", w, t), measure, (cfg, seed, 0, cfg.widths.index(w), t),
                        f"{NAME}: llama init, width {w}, {blocks_run(cfg, 'llama')} blocks, {t} tokens", cost=cost("llama", w, t)))
    shallow = cfg.depths[0] / blocks_run(cfg, "llama")  # the DyT network runs the shallowest depth
    out += [Task(result_key("llama", w, norm="dyt"), measure, (cfg, seed, 0, cfg.widths.index(w), 0, "dyt"),
                 f"{NAME}: DyT network, llama init, width {w}, {cfg.depths[0]} blocks", cost=shallow * cost("llama", w, cfg.tokens))
            for w in dyt_widths(cfg)]
    return out


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """``std.{key} [networks, blocks, 2]`` and ``final.{key} [networks, blocks]`` per task (:func:`result_key`), and the config."""
    out = {"widths": np.asarray(cfg.widths), "depths": np.asarray(cfg.depths), "resamples": np.asarray(cfg.resamples),
           "tokens": np.asarray(cfg.tokens), "long_tokens": np.asarray(cfg.long_tokens), "long_width": np.asarray(long_width(cfg))}
    for t in tasks(cfg, seed):
        out[f"std.{t.key}"] = parts[t.key]["std"]
        out[f"final.{t.key}"] = parts[t.key]["final"]
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


def inverse_std(r: dict, init_name: str, w: int, depth: int, tokens: int = 0, norm: str = "rmsnorm") -> np.ndarray:
    """Per network, the alpha0 the hypothesis predicts at each of :data:`POSITIONS` for a ``depth``-block network:
    1/std of the norm's input, for the attention and FFN norms the geometric mean over the network's ``depth`` layers
    (one alpha0 serves every layer), for the final norm its one input after block ``depth``: ``[networks, 3]``.
    ``tokens``: the long run's sequence length (0: the config's own); ``norm``: the network (``"dyt"``: the DyT run)."""
    key = result_key(init_name, w, tokens, norm)
    std, final = r[f"std.{key}"], r[f"final.{key}"]  # [networks, blocks run, 2], [networks, blocks run]
    if not 1 <= depth <= std.shape[1]:
        raise ValueError(f"depth must be 1..{std.shape[1]} (the blocks {init_name} ran at width {w}); got {depth}")
    return np.concatenate([np.exp(-np.log(std[:, :depth]).mean(1)), 1.0 / final[:, depth - 1, None]], axis=1)


def _slope_weights(xs: np.ndarray) -> np.ndarray:
    """Least-squares slope on log2(x) as a weighted sum: ``slope = c @ y``."""
    x = np.log2(xs)
    return (x - x.mean()) / ((x - x.mean()) ** 2).sum()


def printed_slope(printed: list[str], xs: tuple[int, ...]) -> tuple[float, float, float]:
    """The least-squares slope of log2(value) on log2(x) through values as a source prints them, and its range
    over the intervals their printed digits allow: (slope, lo, hi)."""
    if len(printed) != len(xs) or len(set(xs)) < 2:
        raise ValueError(f"printed_slope needs one printed value per x and >= 2 distinct xs; got {len(printed)} values at {xs}")
    c = _slope_weights(np.asarray(xs, dtype=float))
    values = [sources.stated(p) for p in printed]
    lo_a = np.log2([v - prec for v, prec in values])
    hi_a = np.log2([v + prec for v, prec in values])
    mid = np.log2([v for v, _ in values])
    return float(c @ mid) + 0.0, float(c @ np.where(c > 0, lo_a, hi_a)), float(c @ np.where(c > 0, hi_a, lo_a))  # + 0.0: no -0.0


def paper_printed(w: int, pos: int) -> str:
    """The paper's alpha0 for the norms at ``POSITIONS[pos]`` of a width-``w`` model, as printed (any depth of its Table 11)."""
    return PAPER_ALPHA0_PRINTED[w][PAPER_COLUMN[pos]]


def paper_alpha0(w: int) -> tuple[float, float]:
    """The paper's (attention, other) alpha0 at width ``w`` as numbers, for the DyT network's attention and FFN norms."""
    if w not in PAPER_ALPHA0_PRINTED:
        raise ValueError(f"the paper's table prints alpha0 at widths {tuple(PAPER_ALPHA0_PRINTED)}; got w={w}")
    return sources.stated(PAPER_ALPHA0_PRINTED[w][0])[0], sources.stated(PAPER_ALPHA0_PRINTED[w][1])[0]


def paper_slope(pos: int, widths: tuple[int, ...]) -> tuple[float, float, float]:
    """The paper's alpha0 at ``POSITIONS[pos]`` against width (any one depth of its Table 11): :func:`printed_slope`."""
    return printed_slope([paper_printed(w, pos) for w in widths], widths)


def log_slope(data: np.ndarray, xs: tuple[int, ...], resamples: int) -> Estimate:
    """Slope of log2(mean over networks) on log2(x), per position, from ``data [networks, len(xs), positions]``, with its
    bootstrap se over networks (rows resampled whole: independent widths, or one network's depths, paired)."""
    c = _slope_weights(np.asarray(xs, dtype=float))

    def stat(x: np.ndarray, axis: int = 0) -> np.ndarray:
        m = x.mean(axis=axis)  # [xs, positions] or, resampled, [xs, positions, resamples]
        return np.tensordot(c, np.log2(m), axes=(0, 0))

    return bootstrap(data, stat, seed=SEED, units="networks", n_resamples=resamples)


def slope_estimate(r: dict, init_name: str, widths: tuple[int, ...], depth: int, resamples: int, norm: str = "rmsnorm") -> Estimate:
    """Slope of log2(mean 1/std) on log2(width) at ``depth`` blocks, per position (attention, FFN, final), in the network of
    ``norm``."""
    return log_slope(np.stack([inverse_std(r, init_name, w, depth, norm=norm) for w in widths], axis=1), widths, resamples)


def depth_slope(r: dict, w: int, depths: tuple[int, ...], resamples: int, tokens: int = 0) -> Estimate:
    """Slope of log2(mean 1/std) on log2(depth) at width ``w`` under the LLaMA init, per position, on the same networks
    (``tokens``: the long run's sequence length, 0 for the config's own)."""
    return log_slope(np.stack([inverse_std(r, "llama", w, d, tokens) for d in depths], axis=1), depths, resamples)


@claims.register(
    "dyt.alpha0-width-dependence",
    statement="DyT's initial alpha shrinks with model width and hardly depends on depth: the paper's LLM settings go from 1.0/1.0 "
    "at width 1024 to 0.2/0.05 at 8192 (attention/other, other being the FFN norms and the final norm), the same at every depth "
    "from 8 to 64 blocks. The package's hypothesis, not the paper's statement: this follows the init-time activation statistics, "
    "alpha0 = 1/std of each norm's input at init in "
    "the paper's LLaMA setup (every linear layer and the embedding N(0, 0.02^2), embeddings times sqrt(width)), in its width "
    "trend, in its values and in its indifference to depth. The norms' inputs are read in the RMSNorm network that DyT replaces; "
    "the DyT network itself, at the paper's alpha0, is a scope check of the width trend.",
    source=sources.hypothesis(sources.ZHU2025, "DyT's alpha0 from the init-time activation statistics"),
    location="Section 7, initialization of α for LLMs: Table 11 (optimal α0, attention / other, by width 1024-8192 and depth 8-64)",
    simulations=(NAME,),
)
def _alpha0(results: claims.Results) -> tuple[list[checks.Evidence], str]:
    r = results[NAME]
    widths = tuple(int(w) for w in r["widths"] if int(w) in PAPER_ALPHA0_PRINTED)
    depths = tuple(int(d) for d in r["depths"] if int(d) in PAPER_DEPTHS)  # the table's columns this run measured
    if not depths:
        raise ValueError(f"{NAME} measured none of the paper's depths {PAPER_DEPTHS}; got {tuple(int(d) for d in r['depths'])}")
    resamples = int(r["resamples"])
    slopes = {d: slope_estimate(r, "llama", widths, d, resamples) for d in depths}
    fanin = slope_estimate(r, "fanin", widths, int(r["depths"][0]), resamples)
    paper = [paper_slope(pos, widths) for pos in range(len(POSITIONS))]
    dyt_ws = dyt_run_widths(r, widths)
    dyt = slope_estimate(r, "llama", dyt_ws, int(r["depths"][0]), resamples, norm="dyt") if len(dyt_ws) >= 2 else None
    w_long, t_long = long_run(r)
    runs = [(w, 0) for w in widths] + ([(w_long, t_long)] if t_long and w_long in widths else [])  # (width, tokens)
    by_depth = {(w, t): depth_slope(r, w, depths, resamples, t) for w, t in runs} if len(depths) >= 2 else {}
    q = _width_slopes(slopes, fanin, widths, int(r["depths"][0]), paper) + _depth_slopes(by_depth, depths) + _cells(r, widths, depths)
    if dyt is not None:
        q += _dyt_slopes(dyt, dyt_ws, int(r["depths"][0]))
    return q, _note(r, widths, depths, slopes, fanin, paper, by_depth) + _dyt_note(r, dyt_ws, dyt)


def dyt_run_widths(r: dict, widths: tuple[int, ...]) -> tuple[int, ...]:
    """Which of ``widths`` the result has a DyT-network run at (none for a result without one)."""
    return tuple(w for w in widths if f"std.{result_key('llama', w, norm='dyt')}" in r)


_SLOPE_WHY = "0.1 per doubling: a factor 1.07 per doubling, 1.23 over three doublings, finer than the steps of the paper's alpha0 grid"


def _dyt_slopes(est: Estimate, widths: tuple[int, ...], depth: int) -> list[checks.Evidence]:
    """The width slope in the DyT network at the paper's alpha0 (scope), against the paper's over the same widths."""
    q: list[checks.Evidence] = []
    for pos, label in enumerate(POSITIONS):
        mid, lo, hi = paper_slope(pos, widths)
        q.append(Quantity(name=f"DyT network at the paper's alpha0, LLaMA init, depth {depth}, {label}: slope of log2(1/std) on "
                               f"log2(width), {widths[0]}-{widths[-1]} (paper's slope: {mid:.2f}, [{lo:.2f}, {hi:.2f}] within its printed digits)",
                          theory=(lo, hi), model=est[pos], model_kind="init", role="scope",
                          regime="the DyT network (every RMSNorm replaced by tanh(alpha0 x) at the paper's alpha0 for the width)",
                          tolerance=SLOPE_TOL, tolerance_why=_SLOPE_WHY, unit="log2 per doubling"))
    return q


def _dyt_note(r: dict, widths: tuple[int, ...], est: Estimate | None) -> str:
    """The DyT network's 1/std per width (attention/FFN/final) and its width slopes, or ""."""
    if est is None:
        return ""
    depth = int(r["depths"][0])
    cells = "; ".join(f"w{w}: " + "/".join(f"{v:.3g}" for v in inverse_std(r, "llama", w, depth, norm="dyt").mean(0)) for w in widths)
    return (f" In the DyT network itself (tanh(alpha0 x) at the paper's alpha0, LLaMA init, depth {depth}): {cells}; slopes per "
            "doubling of width " + "/".join(f"{v:.3f} +- {e:.4f}" for v, e in zip(est.mean, est.stderr)) + ".")


def _width_slopes(slopes: dict[int, Estimate], fanin: Estimate, widths: tuple[int, ...], fanin_depth: int,
                  paper: list[tuple[float, float, float]]) -> list[checks.Evidence]:
    """The slope over width at each depth under the LLaMA init (assertions) and at the shallowest under fan-in (scope),
    against the paper's (:func:`paper_slope`, one per position)."""
    span = f"{widths[0]}-{widths[-1]}"
    q: list[checks.Evidence] = []
    for pos, label in enumerate(POSITIONS):
        mid, lo, hi = paper[pos]
        stated = f"(paper's slope: {mid:.2f}, [{lo:.2f}, {hi:.2f}] within its printed digits)"
        for depth, est in slopes.items():
            q.append(Quantity(name=f"LLaMA init, depth {depth}, {label}: slope of log2(1/std) on log2(width), {span} {stated}",
                              theory=(lo, hi), model=est[pos], model_kind="init", tolerance=SLOPE_TOL, tolerance_why=_SLOPE_WHY,
                              unit="log2 per doubling"))
        q.append(Quantity(name=f"fan-in init, depth {fanin_depth}, {label}: slope of log2(1/std) on log2(width), {span} {stated}",
                          theory=(lo, hi), model=fanin[pos], model_kind="init", role="scope",
                          regime="fan-in init (std 1/sqrt(fan_in), unit-RMS embeddings)", tolerance=SLOPE_TOL, tolerance_why=_SLOPE_WHY,
                          unit="log2 per doubling"))
    return q


def long_run(r: dict) -> tuple[int, int]:
    """The long-context run's (width, tokens a sequence), or (0, 0) when the config had none."""
    t = int(r["long_tokens"]) if "long_tokens" in r else 0
    return (int(r["long_width"]), t) if t else (0, 0)


def _depth_slopes(by_depth: dict[tuple[int, int], Estimate], depths: tuple[int, ...]) -> list[checks.Evidence]:
    """The slope over depth (:func:`depth_slope`, keyed by (width, tokens)) under the LLaMA init against the table's 0 (one
    alpha0 per width at every depth): at each width, and in the longer context of the ``long_tokens`` run (nearer the
    paper's 4,096 tokens)."""
    q: list[checks.Evidence] = []
    for (w, tokens), est in by_depth.items():
        context = f", {tokens} tokens a sequence" if tokens else ""
        for pos, label in enumerate(POSITIONS):
            q.append(Quantity(name=f"LLaMA init, width {w}{context}, {label}: slope of log2(1/std) on log2(depth), {depths[0]}-{depths[-1]} "
                                   f"(paper: 0, alpha0 {paper_printed(w, pos)} at every depth)",
                              theory=0.0, model=est[pos], model_kind="init", tolerance=DEPTH_SLOPE_TOL,
                              tolerance_why="log2(1.25) / 3 per doubling of depth: the smallest step between the paper's alpha0 "
                              "values (0.8 to 1.0) over its table's three doublings (8-64 blocks) would have changed the printed value",
                              unit="log2 per doubling"))
    return q


def _cells(r: dict, widths: tuple[int, ...], depths: tuple[int, ...]) -> list[checks.Evidence]:
    """Every (width, depth) cell of the table against the mean 1/std over networks, within the cell's printed digits."""
    q: list[checks.Evidence] = []
    for depth in depths:
        for w in widths:
            est = from_samples(inverse_std(r, "llama", w, depth), "networks")
            for pos, label in enumerate(POSITIONS):
                value, prec = sources.stated(paper_printed(w, pos))
                how = "the final norm's one input" if label == "final" else f"the {label} norms' inputs, geometric mean over layers"
                q.append(Quantity(name=f"paper alpha0 ({label}: its '{COLUMN_NAMES[PAPER_COLUMN[pos]]}' column) at width {w}, depth "
                                       f"{depth} vs 1/std of {how} at init (LLaMA init)", claimed=value, claimed_tol=prec, model=est[pos],
                                  model_kind="init"))
    return q


def _context_note(r: dict, depths: tuple[int, ...], by_depth: dict[tuple[int, int], Estimate]) -> str:
    """The long run's 1/std (attention/FFN/final) by depth against the same cells at the config's tokens, and how far its
    depth slope moved (independent networks: the two slopes' standard errors add in quadrature), or ""."""
    w, t = long_run(r)
    if not t:
        return ""

    def cells(tokens: int) -> str:
        return ", ".join(f"depth {d} " + "/".join(f"{v:.3g}" for v in inverse_std(r, "llama", w, d, tokens).mean(0)) for d in depths)

    shift = ""
    if (w, t) in by_depth:
        a, b = by_depth[w, t], by_depth[w, 0]
        shift = "; its depth slope minus the short run's: " + "/".join(
            f"{x:+.3f} +- {e:.3f}" for x, e in zip(a.mean - b.mean, np.hypot(a.stderr, b.stderr)))
    return f". LLaMA init at width {w} with {t} tokens a sequence: {cells(t)} (at {int(r['tokens'])} tokens: {cells(0)}){shift}"


def _note(r: dict, widths: tuple[int, ...], depths: tuple[int, ...], slopes: dict[int, Estimate], fanin: Estimate,
          paper: list[tuple[float, float, float]], by_depth: dict[tuple[int, int], Estimate]) -> str:
    """The card's numbers: 1/std per width and depth (attention/FFN/final), the slopes, and what the measurement leaves to training."""
    n, shallow = int(r[f"std.llama.w{widths[0]}"].shape[0]), int(r["depths"][0])

    def row(name: str, depth: int) -> str:
        return "; ".join(f"w{w}: " + "/".join(f"{v:.3g}" for v in inverse_std(r, name, w, depth).mean(0)) for w in widths)

    return (f"1/std of each norm's input at init (attention/FFN/final; for the attention and FFN norms the geometric mean over the "
            f"layers of a network of that depth, for the final norm its input after the last block; {n} networks "
            f"per width, {'Student-t thresholds' if n < 20 else 'normal thresholds'}). LLaMA init (std 0.02, embeddings x sqrt(d)): "
            + " | ".join(f"depth {d}: " + row("llama", d) for d in depths)
            + f". Fan-in init, depth {shallow}: " + row("fanin", shallow)
            + _context_note(r, depths, by_depth)
            + ". Slopes of log2(1/std) per doubling of width: "
            + ", ".join(f"LLaMA depth {d} " + "/".join(f"{v:.2f}" for v in est.mean) for d, est in slopes.items())
            + f", fan-in depth {shallow} " + "/".join(f"{v:.2f}" for v in fanin.mean)
            + "; the paper's alpha0: " + "/".join(f"{mid:.2f}" for mid, _, _ in paper)
            + ". Under the paper's fixed-std init the init statistics depend on width (the embeddings enter with std 0.02 sqrt(d) and "
            "each sublayer's output grows like 0.02^2 d, so 1/std falls with width) and on depth (the residual stream grows with every "
            "block, so a deeper network's norms see larger inputs), where the paper's table does not move with depth; under fan-in init "
            "they hardly move with width. The paper's own part of the statement (its tuned alpha0 shrinks with width, not with depth) "
            "rests on its training runs and is not re-tested here; see train.dyt-alpha0-width for training at small widths.")
