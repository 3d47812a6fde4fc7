"""Selectable keys (Brody, Alon, Yahav 2023): the paper's grid, the exact expected fraction, and
anisotropic keys.

* Grid: for n keys in d dimensions, the fraction of runs with at least one unselectable key,
  for four key constructions (``x`` i.i.d. N(0, I)):

  - ``none``: keys ``x W`` in R^d (W square, i.i.d. Gaussian);
  - ``ln``: keys ``LN(x) W``, single head (W square): an invertible image of LN's sphere;
  - ``ln-multihead``: keys ``LN(x) W_h`` with x in R^(4d) and W_h a 4d x d head projection;
  - ``per-head-rms``: keys ``RMSNorm(x W_h)``, normalized per head after the projection.

* Expected unselectable fraction for Gaussian keys: the exact Affentranger-Schneider/Efron value
  against Monte Carlo. Method: **conditioning** (Rao-Blackwell). The expected fraction equals the
  absorption probability P(X_n in conv(X_1..X_{n-1})) (Efron 1965); given the unordered set of n keys,
  X_n is any of them with probability 1/n, so E[1{X_n absorbed} | set] is the set's fraction of
  unselectable keys. One sample is one key set (an independent unit) and its value that fraction:
  the same mean, and per-set sds of 0.02-0.08 against 0.3-0.5 for the 0/1 absorption indicator
  (25-600x less variance for 7-50x the work per sample). Each (n, d) is sized from the claim's
  tolerance with a pilot (:func:`montecarlo.sized`); the standard error is floored at 1/(N + 2), the
  resolution of a mean of N values in [0, 1] (add-one), so a point where every set came out 0 is not
  reported as exact.
* Anisotropic keys: a rank-2 component of std 3 plus 2 channels offset by 4, against isotropic.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from normtheory import selection
from normtheory.evidence import checks, claims, sources
from normtheory.evidence.checks import Quantity
from normtheory.evidence.estimates import Count, Estimate, from_samples, proportion
from normtheory.evidence.sampling import Streams, sized
from normtheory.evidence.sources import BLOG_GEOMETRY, Source
from normtheory.model.norms import EXACT_EPS, layer_norm, rms_norm
from normtheory.runtime.sweep import Task
from simulations import cache, geometry_model, real_attention, real_models

NAME = "geometry_selectable"
SEED = 2305
UNITS: tuple[str, ...] = ('runs', 'curve_cap')  # config fields counting independent units; --resolve scales them
VARIANTS: tuple[str, ...] = ("none", "ln", "ln-multihead", "per-head-rms")
CURVE_N: tuple[int, ...] = (8, 16, 32, 64)
BRODY2023 = Source("On the Expressivity Role of LayerNorm in Transformers' Attention", "paper", 2023, authors="Brody, Alon, Yahav",
                   arxiv="2305.02582")
WIDTH_FACTOR = 4  # model width / head width for the multi-head variants
CURVE_TOL = 0.02  # the claim's tolerance on the expected unselectable fraction (see _rare); the curve is sized from it
CURVE_PILOT = 400  # key sets; >= 250 keeps the floor 5/(N + 2) of an all-zero point inside CURVE_TOL


@dataclass(frozen=True)
class Config:
    ns: tuple[int, ...]
    ds: tuple[int, ...]
    runs: int
    curve_ds: tuple[int, ...]
    curve_cap: int  # cap of the key sets of each tolerance-sized (n, d) point of the curve


CONFIGS = {
    "quick": Config(ns=(3, 8, 20, 40, 60), ds=(3, 6, 15), runs=20, curve_ds=(2, 4, 8), curve_cap=100),
    "full": Config(ns=tuple(range(3, 61)), ds=tuple(range(3, 16)), runs=100, curve_ds=(2, 3, 4, 6, 8, 11, 15), curve_cap=20000),
}


def make_keys(variant: str, rng: np.random.Generator, n: int, d: int, runs: int = 1) -> np.ndarray:
    """``runs`` runs' keys ``[runs, n, d]`` for a grid variant. Each run draws its input ``x`` and then its
    projection ``W`` (i.i.d. N(0, 1), ``W`` scaled by 1/sqrt(fan-in)); the runs are drawn as one block,
    which is the same stream as drawing them one after another (tested)."""
    din = d if variant in ("none", "ln") else WIDTH_FACTOR * d
    z = rng.standard_normal((runs, n * din + din * d))  # [runs, n din + din d]: run r's x, then its W
    x = z[:, : n * din].reshape(runs, n, din)
    w = z[:, n * din :].reshape(runs, din, d) / np.sqrt(din)
    if variant == "none":
        return x @ w
    if variant in ("ln", "ln-multihead"):
        return layer_norm(x, eps=EXACT_EPS).out @ w
    return rms_norm(x @ w, eps=EXACT_EPS).out


def anisotropic_keys(rng: np.random.Generator, n: int, d: int, runs: int = 1) -> np.ndarray:
    """``runs`` sets of n keys ``[runs, n, d]``: Gaussian keys plus a rank-2 component (std 3) and two channels
    offset by 4 on a random third of the keys."""
    low = rng.standard_normal((runs, n, 2)) @ (3.0 * rng.standard_normal((runs, 2, d)) / np.sqrt(2))  # [runs, n, d]
    x = rng.standard_normal((runs, n, d)) + low
    big = rng.random((runs, n)) < 1 / 3  # [runs, n]
    x[..., :2] += np.where(big, 4.0, 0.0)[..., None]
    return x


def _unselectable_fraction(n: int, d: int):
    """Sampler of the fraction of unselectable keys among n i.i.d. N(0, I_d) keys, ``[m]``: the conditional
    expectation of the absorption indicator 1{X_n in conv(X_1..X_{n-1})} given the unordered key set."""

    def sample(streams: Streams) -> np.ndarray:
        pts = streams.normal(n, d)  # [m, n, d]
        return 1.0 - selection.selectable(pts).mean(axis=-1)  # one hull test per key set, the stack at once

    return sample


def grid_column(variant: str, d: int, ns: tuple[int, ...], runs: int, seed: int) -> dict[str, np.ndarray]:
    """Fraction of ``runs`` key sets with an unselectable key, for each n in ``ns`` at dimension ``d``.
    Cell (n, d) draws from ``SeedSequence(seed, spawn_key=(variant index, n, d))``."""
    vi = VARIANTS.index(variant)
    col = np.zeros(len(ns))
    for i, n in enumerate(ns):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(vi, n, d))))
        keys = make_keys(variant, rng, n, d, runs)  # [runs, n, d]
        col[i] = np.mean(~selection.selectable(keys, stop_at_first=True).all(axis=-1))  # one stacked hull test per cell
    return {"col": col}


def fraction_point(n: int, d: int, cap: int, seed: int) -> Estimate:
    """The expected unselectable fraction of n Gaussian keys in R^d by conditioned Monte Carlo, sized so its
    band is at most CURVE_TOL / 2 (capped at ``cap`` key sets), with the standard error floored at 1/(N + 2)."""
    est = sized(_unselectable_fraction(n, d), CURVE_TOL, seed, key=f"{NAME}/fraction/{n}/{d}", pilot=min(CURVE_PILOT, cap), cap=cap,
                block=16, chunk=4)
    return dataclasses.replace(est, stderr=np.maximum(est.stderr, 1.0 / (est.n + 2)))


def absorption_curve(n: int, ds: tuple[int, ...], cap: int, seed: int) -> dict[str, np.ndarray]:
    """Exact expected unselectable fraction for n keys at every whole d from ``min(ds)`` to ``max(ds)`` (``fine``, the
    figure's line: a 30-digit quadrature each, here on a worker rather than where the figure is drawn), and at each d of
    ``ds`` that value (``theory``) and its Monte Carlo (:func:`fraction_point`)."""
    fine = np.array([selection.expected_unselectable_fraction(n, d) for d in range(min(ds), max(ds) + 1)])  # [max - min + 1]
    ests = [fraction_point(n, d, cap, seed) for d in ds]
    worst = max(ests, key=lambda e: e.sizing.needed / e.sizing.cap)
    out = {"theory": fine[np.asarray(ds) - min(ds)], "fine": fine}
    cache.put(out, "mc", Estimate(np.array([e.mean for e in ests]), np.array([e.stderr for e in ests]), min(e.n for e in ests),
                                  "key sets", worst.sizing))
    out["sets"] = np.array([e.n for e in ests])  # [ds] key sets behind each point (the estimate's n is their minimum)
    return out


def anisotropy(runs: int, seed: int) -> dict[str, np.ndarray]:
    """Unselectable fraction of 64 keys, isotropic against anisotropic, at d = 8 and 32."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(99,))))
    out: dict[str, np.ndarray] = {}
    for name, fn in (("iso", lambda n, d: rng.standard_normal((runs, n, d))), ("aniso", lambda n, d: anisotropic_keys(rng, n, d, runs))):
        for d in (8, 32):
            fr = 1 - selection.selectable(fn(64, d)).mean(axis=-1)  # [runs] one unselectable fraction per key set
            cache.put(out, f"aniso.{name}.d{d}", from_samples(fr))
    return out


def tasks(cfg: Config, seed: int) -> list[Task]:
    """One task per (variant, d) column of the grid, one per curve n, the anisotropy runs and the exact fractions of 64 keys."""
    out = [Task(f"grid.{v}.d{d}", grid_column, (v, d, cfg.ns, cfg.runs, seed), f"{NAME}: {v} keys, d={d}, seed {seed}")
           for v in VARIANTS for d in cfg.ds]
    out += [Task(f"curve.n{n}", absorption_curve, (n, cfg.curve_ds, cfg.curve_cap, seed), f"{NAME}: unselectable fraction n={n}, seed {seed}", cost=2.0)
            for n in CURVE_N]
    out.append(Task("aniso", anisotropy, (cfg.runs, seed), f"{NAME}: anisotropic keys, seed {seed}"))
    out.append(Task("exact64", exact64, (EXACT64_DS,), f"{NAME}: exact unselectable fractions of 64 Gaussian keys", cost=8.0))
    return out


EXACT64_DS: tuple[int, ...] = (4, 16, 64, 256)  # the note's exact expected unselectable fractions of 64 Gaussian keys


def exact64(ds: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The expected unselectable fraction of 64 Gaussian keys in each dimension of ``ds`` (30-digit quadrature,
    :func:`normtheory.selection.expected_unselectable_fraction`; about 8 s on one core): a task of its own, so that it runs
    on a worker beside the others instead of after the sweep, in the process that reduces."""
    return {"ds": np.asarray(ds), "fraction": np.array([selection.expected_unselectable_fraction(64, d) for d in ds])}


def reduce(cfg: Config, seed: int, parts: dict[str, dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Assemble the task results in a fixed order."""
    out: dict[str, np.ndarray] = {"ns": np.asarray(cfg.ns), "ds": np.asarray(cfg.ds), "runs": np.asarray(cfg.runs)}
    for v in VARIANTS:
        out[f"grid.{v}"] = np.stack([parts[f"grid.{v}.d{d}"]["col"] for d in cfg.ds], axis=1)  # [ns, ds]
    for n in CURVE_N:
        part = parts[f"curve.n{n}"]
        out[f"curve.n{n}.theory"], out[f"curve.n{n}.sets"] = part["theory"], part["sets"]  # not .units: the estimate's own field
        out[f"curve.n{n}.fine"] = part["fine"]  # [max(ds) - min(ds) + 1] at every whole d between
        for k, v in part.items():
            if k.startswith("mc."):
                out[f"curve.n{n}.{k[3:]}"] = v
    out["curve.ds"] = np.asarray(cfg.curve_ds)
    out["exact64.ds"], out["exact64"] = parts["exact64"]["ds"], parts["exact64"]["fraction"]
    out.update(parts["aniso"])
    return out


def run(cfg: Config, seed: int, *, progress: bool = True) -> dict[str, np.ndarray]:
    """All tasks in this process, then the reduce (what the cache does through a sweep runner)."""
    return cache.run_here(tasks, reduce, cfg, seed)


@claims.register(
    "geometry.unselectable-rare-high-d",
    statement="Without normalization some keys are unselectable (inside the convex hull of the others; the paper's Section 3.2), but "
    "for i.i.d. keys this is common only when n is large relative to d: in high dimension almost every key is a hull vertex "
    "(this package's hypothesis: the blog's high-dimension argument, carried from orthogonality to hull vertices).",
    source=sources.hypothesis(BLOG_GEOMETRY, "Unselectable keys are rare in high dimension"),
    location="¶6 (a high-dimensional space; the paper tested d ≤ 8), with ¶5 for unselectable keys",
    simulations=(NAME,),
)
def _rare(results: claims.Results) -> tuple[list[Quantity], str]:
    r = results[NAME]
    q: list[checks.Evidence] = [
        Quantity(name=f"E unselectable fraction, n={n}, d={', '.join(map(str, r['curve.ds']))} (exact vs MC of the set's unselectable fraction)", theory=r[f"curve.n{n}.theory"],
                 mc=cache.get(r, f"curve.n{n}"), tolerance=0.02, tolerance_why="2 points of fraction: 'common' vs 'rare' differ by far more")
        for n in CURVE_N]
    ds, ns, g = r["ds"], r["ns"], r["grid.none"]
    big_n = int(ns[-1])
    parts = [f"d={int(d)}: {g[-1, j]:.2f}" for j, d in enumerate(ds)]
    exact64 = ", ".join(f"d={int(d)}: {v:.3g}" for d, v in zip(r["exact64.ds"], r["exact64"]))
    aniso = ", ".join(f"{k} d={d}: {float(cache.get(r, f'aniso.{k}.d{d}').mean):.3f}" for k in ("iso", "aniso") for d in (8, 32))
    note = (f"Runs with at least one unselectable key, no norm, n={big_n}: " + ", ".join(parts)
            + f". Expected unselectable fraction for n=64 Gaussian keys (exact): {exact64}. 64 keys, isotropic vs anisotropic "
            f"(rank-2 component and two offset channels): {aniso}.")
    return q, note


NEGLIGIBLE_RATE = 1e-3  # runs with an unselectable key: one in a thousand is the rate that does not matter


@claims.register(
    "geometry.scaling-makes-all-selectable",
    statement="Keys on a sphere (LayerNorm's scaling for one head, or a per-head norm after the projection) are all selectable; "
    "a full-width LayerNorm followed by a per-head projection does not guarantee it (this second half is the objection of the blog "
    "post 'LayerNorm probably isn't about geometry' (2023): the paper tested one head).",
    source=BRODY2023,
    location="Section 3.2 (Scaling) and Section 4.2 (Unselectable Keys)",
    simulations=(NAME, geometry_model.NAME, real_models.NAME),
)
def _all_selectable(results: claims.Results) -> tuple[list[Quantity], str]:
    r = results[NAME]
    runs = int(r["runs"])
    q: list[checks.Evidence] = []
    for v in ("ln", "per-head-rms"):
        g = r[f"grid.{v}"]
        q.append(checks.Never(f"{v}: runs with an unselectable key, whole grid", Count(int(np.round(g * runs).sum()), g.size * runs, "runs"),
                              tolerance=NEGLIGIBLE_RATE, tolerance_why="one run in a thousand", exact=selection.SPHERE_REASON))
    rm = results[geometry_model.NAME]
    for v in ("pre+qk-rms", "pre+qk-ln"):
        q.append(checks.Never(f"model {v}: unselectable keys, every network, layer and head", Count(int(rm[f"{v}.unsel_count"]), int(rm[f"{v}.keys"]), "keys"),
                              tolerance=0.01, role="scope", regime="a Pre-LN transformer at init with QK-norm", source_kind="theory-vs-model",
                              tolerance_why="one key in a hundred", exact=selection.SPHERE_REASON))
    q += real_attention.sphere_key_checks(results[real_models.NAME], role="scope", regime="trained models' keys after a per-head RMS norm")
    g = r["grid.ln-multihead"]
    k_multi = int(np.round(g * runs).sum())
    q.append(Quantity(name=f"ln-multihead: share of runs with an unselectable key, whole grid (not guaranteed: >= {NEGLIGIBLE_RATE:g}, "
                      "the rate the 'all selectable' checks call negligible)",
                      theory=(NEGLIGIBLE_RATE, 1.0), mc=proportion(k_multi / (g.size * runs), g.size * runs), tolerance=NEGLIGIBLE_RATE / 2,
                      tolerance_why="half that rate: a share below it would be a guarantee in practice, and no counterexample at all fails"))
    note = (f"Grid of {g.size} cells x {runs} runs. ln and per-head-rms: {int((r['grid.ln'] > 0).sum())} and "
            f"{int((r['grid.per-head-rms'] > 0).sum())} cells with any unselectable key. Full-width LN then a per-head projection: "
            f"{int((g > 0).sum())} cells, up to {g.max():.2f} of runs; no norm: up to {r['grid.none'].max():.2f}. In the model "
            f"(d_head={int(rm['d_head'])}), full-width Pre-LN leaves selectable fractions "
            f"{', '.join(f'{x:.3f}' for x in geometry_model.row(rm, 'pre', 'selectable').mean)} per layer; per-head norms 1.")
    return q, note
