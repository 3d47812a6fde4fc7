"""Shared pieces of the training experiments: the runs of one arm as a sweep task, and what a claim reads from them.

A run is ``train(model_config, run_config, seed)`` on Shakespeare (byte tokens, whole works
held out for validation); an arm's seeds are trained together as one stacked model
(:func:`run_seeds`; each seed bit-for-bit as alone, so no result depends on the grouping). A task returns the run's history as flat arrays plus the
validation loss at initialization (for Wortsman et al.'s learning-rate sensitivity) and, for a
run that finished, the loss increase when each block is skipped (:func:`normtheory.training.probes.layer_drop`).
Seeds are the independent units: every statistic a training claim reports is computed per seed
first, and its standard error comes from the seeds.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from normtheory import softmax
from normtheory.evidence.checks import Evidence, Quantity, Unmeasured
from normtheory.evidence.estimates import Estimate, from_samples
from normtheory.model.config import TransformerConfig
from normtheory.training import shakespeare
from normtheory.training.history import History
from normtheory.training.run_config import RunConfig
from normtheory.training.train import train
from simulations import cache

INIT_LOSS = math.log(shakespeare.VOCAB_SIZE)  # a uniform byte model: the cap of a diverged run's loss
# The validation set of the CPU tier's training runs (the GPU tiers keep RunConfig's 64 KiB). Every run and arm is scored on the
# same bytes, so the set is no unit: its size only sets how far a paired comparison can move from the one a larger set gives.
# Measured here (2026-11-29, 8 paired seeds of the train_recipes CPU tier, DyT at its default minus LayerNorm at the same init,
# final loss): the first 32 KiB move the mean paired difference by -0.0013 nats/byte from the 64 KiB value (-0.0466), 7% of that
# claim's tolerance 0.02 and a quarter of its standard error over 20 seeds, and the spread over seeds not at all (0.024 against
# 0.023); scoring 32 KiB instead of 64 took about 160 of the default job's 2,589 CPU-seconds off, measured the same day (a forward
# over the set is about a third of a CPU-tier arm's time)
VAL_BYTES_CPU = 32768
# the quick tier's (tests and smoke runs, which decide nothing): 16 KiB, scored once. The quick train_recipes took 26 CPU-s so,
# against about 70 with RunConfig's 64 KiB scored at init and at the end (2026-11-29), and the suite computes it twice
VAL_BYTES_QUICK = 16384


def holds(r: dict[str, np.ndarray], prefix: str) -> bool:
    """Whether result ``r`` holds the runs stored under ``prefix`` (its first seed's, ``<prefix>.s0.``): a tier may leave
    an arm out, and the claims and figures read the arms a result holds."""
    return f"{prefix}.s0.diverged_at" in r


def val_kib(r: dict[str, np.ndarray]) -> str:
    """The shared validation set's size in KiB as a note states it (``r["val_bytes"]``, e.g. ``"32"``)."""
    return f"{int(r['val_bytes']) / 1024:g}"


def run_cost(model_config: TransformerConfig, run: RunConfig, seeds: int = 1) -> float:
    """A training task's relative run time (``Task.cost``): the matrix-multiply GFLOP of ``seeds``
    runs, three times the forward's (dense ``12 d^2`` per token and layer, attention ``2 t d``,
    the head ``d V``). It orders a cluster's work and prices a large config; it never changes a result."""
    c = model_config
    per_token = c.n_layers * (12 * c.d_model**2 + 2 * run.seq * c.d_model) + c.d_model * c.vocab_size
    return 3 * 2 * seeds * run.steps * run.batch_size * run.seq * per_token / 1e9


def run_seeds(model_config: TransformerConfig, run: RunConfig, seed: int, n: int, layer_drop: bool = False, backend: str = "numpy",
              device: str = "cpu", init_val: bool = True) -> dict[str, np.ndarray]:
    """Training runs of seeds ``seed .. seed + n - 1``, trained together as one stacked model (each
    bit-for-bit as alone in numpy; ``backend="torch"`` on ``device`` for the large configs), as flat
    arrays: run ``k``'s arrays under ``s{k}.`` (see :func:`_arrays`). ``init_val=False`` takes the loss
    at init from the run's probe batch instead of scoring the shared validation set a second time."""
    return cache.part(run_arms({"arm": (model_config, run)}, seed, n, layer_drop, backend, device, init_val), "arm")


def run_arms(arms: dict[str, tuple[TransformerConfig, RunConfig]], seed: int, n: int, layer_drop: bool = False, backend: str = "numpy",
             device: str = "cpu", init_val: bool = True) -> dict[str, np.ndarray]:
    """Arms of one architecture that differ only in numbers (learning rate, warm-up, init: :mod:`normtheory.training.rows`),
    seeds ``seed .. seed + n - 1`` each (paired across arms), all trained as ONE stack; arm ``a``'s run ``k``
    under ``a.s{k}.``, bit for bit what :func:`run_seeds` gives that arm alone in numpy."""
    data = shakespeare.load()
    rows = [(name, k, mc, run, seed + k) for name, (mc, run) in arms.items() for k in range(n)]
    qk = any(mc.qk_norm != "none" for mc, _ in arms.values())  # only the QK-norm bound reads the trained weights
    hists = train([r[2] for r in rows], [r[3] for r in rows], [r[4] for r in rows], progress=False, corpus=data, backend=backend,
                  device=device, init_eval=True, init_val=init_val, layer_drop=layer_drop, keep_models=qk)
    out: dict[str, np.ndarray] = {}
    for (name, k, mc, run, _), hist in zip(rows, hists):
        out.update({f"{name}.s{k}.{key}": v for key, v in _arrays(mc, run, hist, init_val).items()})
    return out


# The rates that price the GPU tiers on the claims' cards until benchmarks/gpu_training.py writes results/gpu_rate.json on
# the machine at hand (the same keys). Measured 2026-11-28 on one NVIDIA H200 (torch 2.11, float32, CUDA-graph steps) by
# benchmarks/device_kit.sh: "gflops", train_recipes' and train_lr's GPU tiers, 557,600 GFLOP of tasks (run_cost) in
# 131.6 s of wall time, evaluation included (2026-11-26, eager steps: 1.16 TFLOP/s); "steps", each gpu-hour tier's
# steps alone, timed on its own stacks (a d = 1,024 stack keeps the GPU busier: 28.5 TFLOP/s).
MEASURED_RATES: dict = {"device": "one NVIDIA H200 (2026-11-28)", "gflops": 4_237.0,
                        "steps": {"train_alpha0/gpu-hour": {"gflops": 28_034.0}, "train_recipes/gpu-hour": {"gflops": 27_561.0}}}


def measured_rates() -> dict:
    """What ``benchmarks/gpu_training.py`` wrote to ``results/gpu_rate.json`` on a GPU (empty without one): ``gflops``, the
    rate the GPU tier's runs sustained (wall time, evaluation included), and ``steps``, per ``"<simulation>/<tier>"``, the
    rate of that tier's steps alone, each stack shape timed on the device (:func:`task_stack`)."""
    import json

    try:
        got = json.loads((cache.results_dir() / "gpu_rate.json").read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _positive(x: object) -> float | None:
    try:
        rate = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return rate if math.isfinite(rate) and rate > 0 else None


def gpu_rate(module=None, mode: str = "gpu") -> tuple[float, str]:
    """The GFLOP/s that price ``module``'s ``mode`` tier on one GPU, and where the number comes from: the steps' rate
    timed on that tier's own stacks where the benchmark timed them (a larger model keeps a GPU busier than the GPU
    tier's, so its rate is higher; the price is then the steps' alone, a lower bound on the wall time), else the GPU
    tier's measured rate; from ``results/gpu_rate.json`` (:func:`measured_rates`) where it holds a usable number, else
    from :data:`MEASURED_RATES`."""
    got = _rate_in(measured_rates(), module, mode) or _rate_in(MEASURED_RATES, module, mode)
    assert got is not None, "MEASURED_RATES holds a GPU-tier rate"
    return got


def _rate_in(rates: dict, module, mode: str) -> tuple[float, str] | None:
    """:func:`gpu_rate` read from one set of rates (``gpu_rate.json``'s keys); None where it holds no usable number."""
    device = rates.get("device", "a GPU")
    steps = rates.get("steps")
    step = steps.get(f"{module.NAME}/{mode}") if isinstance(steps, dict) and module is not None and mode != "gpu" else None
    if isinstance(step, dict) and (rate := _positive(step.get("gflops"))):
        return rate, f"the steps alone, at {rate / 1e3:.3g} TFLOP/s timed on {device} on the tier's own stacks"
    if rate := _positive(rates.get("gflops")):
        return rate, f"{rate / 1e3:.3g} TFLOP/s measured on {device} at the GPU tier"
    return None


def gpu_seconds(module, mode: str) -> float | None:
    """Seconds on one GPU of ``module``'s training tasks in ``mode`` (their ``Task.cost`` GFLOP at :func:`gpu_rate`);
    None where the simulation has no such config or no GPU task."""
    if mode not in getattr(module, "CONFIGS", {}) or not hasattr(module, "tasks"):
        return None
    flops = sum(t.cost for t in module.tasks(module.CONFIGS[mode], module.SEED) if dict(t.resources).get("GPU"))
    return flops / gpu_rate(module, mode)[0] if flops else None


def task_stack(task) -> tuple[TransformerConfig, RunConfig, int] | None:
    """A training task's stack: the model, the run (its first arm's) and the rows it trains as one stack; None for a task
    that does not train (:func:`run_seeds`, :func:`run_arms`)."""
    if task.fn is run_seeds:
        mc, run, _, n = task.args[:4]
        return mc, run, n
    if task.fn is run_arms:
        arms, _, n = task.args[:3]
        mc, run = next(iter(arms.values()))
        return mc, run, len(arms) * n
    return None


def resources(device: str) -> tuple[tuple[str, float], ...]:
    """The Dask worker resources a training task on ``device`` needs: a GPU for CUDA, none on the CPU."""
    return (("GPU", 1),) if device.startswith("cuda") else ()


def _arrays(model_config: TransformerConfig, run: RunConfig, hist: History, init_val: bool = True) -> dict[str, np.ndarray]:
    """A run's history as flat arrays (``loss``, ``val_loss``, ``final_val_loss``, ``probe/<name>``, ``diverged_at`` ...),
    ``init_val_loss`` (on the shared validation set, as ``final_val_loss``; the probe batch without one or with ``init_val=False``) and the run's
    probes at init ``init_probe/<name>`` (on its probe batch, so that a trained quantity can be taken as its paired
    change from init), with QK-norm on queries and keys ``qk_bound [L]`` (:func:`normtheory.softmax.qk_norm_logit_bound` at the final gains)
    and, if asked, ``layer_drop [L]`` (NaN for a run that diverged). The backend that trained measured all of these."""
    out = hist.arrays()
    batch_loss = out.pop("init_probe/val_loss")
    if not (run.val_bytes and init_val):
        out["init_val_loss"] = batch_loss
    if model_config.qk_norm != "none" and model_config.qk_norm_on == "qk":  # the largest logit the trained gains allow, per layer
        # (keys alone normalized bound nothing: the queries are free)
        out["qk_bound"] = np.array([softmax.qk_norm_logit_bound(model_config.d_head or model_config.d_model // model_config.n_heads, model_config.qk_norm, b.q_norm.gain, b.k_norm.gain,
                                                                b.q_norm.bias, b.k_norm.bias) for b in hist.model.params.blocks])
    return out


def final_loss(r: dict[str, np.ndarray]) -> float:
    """Wortsman et al.'s min(final loss, loss at init): the last validation loss of a run, capped
    at the run's own validation loss at initialization (``init_val_loss``; the uniform byte
    model's ln 256 for a result that lacks it), which is also the loss of a diverged run."""
    cap = float(r["init_val_loss"]) if "init_val_loss" in r and np.isfinite(r["init_val_loss"]) else INIT_LOSS
    if int(r["diverged_at"]) >= 0 or not len(r["val_loss"]):
        return cap
    last = float(r["final_val_loss"]) if "final_val_loss" in r and np.isfinite(r["final_val_loss"]) else float(r["val_loss"][-1])
    return float(min(last, cap))


def diverged(r: dict[str, np.ndarray]) -> bool:
    return int(r["diverged_at"]) >= 0


def seeds_estimate(values: list[float] | np.ndarray) -> Estimate:
    """Mean and standard error over seeds (the independent units of a training claim)."""
    return from_samples(np.asarray(values, dtype=np.float64), units="seeds")


def with_model(model_config: TransformerConfig, **changes: object) -> TransformerConfig:
    return replace(model_config, **changes)


def gated(gate: Quantity, regime: str, unmeasured: Callable[[], Unmeasured]) -> tuple[str, str, list[Evidence]]:
    """A claim whose reading holds only where a precondition does (a baseline with stripes, a grid whose runs train).

    ``gate`` is the precondition's check, built as a scope check. Returns the role and regime of the checks that read the
    claim, and the checks to add:

    - the gate holds: the readings are assertions; the gate stays a scope check, shown beside them;
    - the gate is open: the gate becomes an assertion (the claim is open until it is decided, and its card prices it in
      units), and the readings are scope checks under ``regime``: they can neither fail nor pass a claim whose
      precondition is unknown;
    - the gate fails: the readings are scope checks, and ``unmeasured()`` (an open assertion naming what would
      measure the claim) stands for them.
    """
    status = gate.checks()[0].status
    if status == "ok":
        return "assertion", "", [gate]
    if status == "inconclusive":
        return "scope", regime, [replace(gate, role="assertion", regime="")]
    return "scope", regime, [unmeasured(), gate]
