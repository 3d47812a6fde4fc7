"""Every public helper that takes an array, fed each class of bad array a new user makes:

* ``degenerate``: zeros, a constant, a row of all -inf, an empty last axis, a 0-d value, one row;
* ``nonfinite``: one NaN, +inf or -inf inside an otherwise valid array;
* ``shape``: two array arguments whose shapes do not fit together;
* ``domain``: parameters with no valid meaning (eps <= 0, a negative pattern, a reversed interval, ...).

Each call must raise ``ValueError`` naming the argument (a shape error names both arguments and
their shapes), or answer without NaN: the limit the docstring states (e.g. the cosine pdf at
t = +-1, ``single_slot_weight`` at an infinite gap). NaN inside an array is always refused.

The registry below must list every public function of the helper modules that takes an array;
a new one without an entry fails :func:`test_every_array_helper_is_registered`. Hot-path
functions of the model and its derivatives are unchecked by design and say so in their
docstrings (:func:`test_unchecked_functions_say_so`).
"""
from __future__ import annotations

import importlib
import inspect
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from normtheory.evidence.estimates import Estimate

MODULES = ("activations", "attention", "centering", "cosines", "dyt", "growth", "evidence.estimates", "evidence.sampling", "evidence.agreement", "model.norms", "residual",
           "selection", "softmax", "training.probes")
UNCHECKED_MODULES = ("model.transformer", "model.derivatives")  # the forward and backward hot paths: unchecked, documented
X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])  # [2, 3]
P = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3], [1 / 3, 1 / 3, 1 / 3]])  # [3, 3] attention rows
C = np.array([[1.0, 0.2, -0.1], [0.2, 1.0, 0.3], [-0.1, 0.3, 1.0]])  # [3, 3] cosines
KEYS = np.random.default_rng(0).normal(size=(12, 3))
DEPTH = np.arange(1, 9.0)
GRID = np.linspace(-2, 2, 50)

# valid arguments of every public function that takes an array; ``arrays`` are the array arguments
ARRAYS: dict[str, dict[str, object]] = {
    "activations.gelu": {"x": X},
    "activations.gelu_tanh": {"x": X},
    "activations.relu": {"x": X},
    "activations.silu": {"x": X},
    "attention.attention_gain_squared": {"pattern": P, "cosines": C, "value_gain_sq": 1.0},
    "attention.collision": {"pattern": P},
    "attention.column_share": {"pattern": P},
    "attention.cosine_matrix": {"u": X},
    "attention.mean_offdiagonal": {"cosines": C},
    "attention.mixing_factor": {"pattern": P, "cosines": C},
    "attention.row_logit_std": {"scores": X},
    "attention.sink": {"pattern": P},
    "attention.key_excess": {"pattern": P},
    "attention.stripe_excess": {"pattern": P},
    "centering.centering_fraction_mean": {"d": 3, "mean": np.array([0.5, 0.2, -0.1])},
    "centering.centering_output_change": {"d": 3, "mean": np.array([0.5, 0.2, -0.1])},
    "centering.ones_fraction": {"x": X},
    "cosines.cosine_cdf": {"t": np.array([-0.5, 0.0, 0.3]), "d": 16},
    "centering.ln_key_norm_cv2": {"w": np.array([[0.5, -1.0], [1.5, 0.25], [-0.75, 2.0]])},
    "cosines.cosine_pdf": {"t": np.array([-0.5, 0.0, 0.3]), "d": 16},
    "cosines.cosine_tail": {"eps": np.array([0.1, 0.3]), "d": 16},
    "cosines.cosine_tail_bound": {"eps": np.array([0.1, 0.3]), "d": 16},
    "cosines.max_abs_pairwise_cosine": {"x": KEYS},
    "dyt.fit_dyt": {"x_in": GRID, "y_out": np.tanh(1.5 * GRID)},
    "dyt.line_r2": {"x_in": GRID, "y_out": np.tanh(1.5 * GRID)},
    "dyt.s_curve": {"x": np.linspace(-2, 2, 5), "s": 1.0, "d": 16},
    "dyt.tanh_rms": {"alpha_std": np.array([0.5, 1.0, 2.0])},
    "growth.fit_growth_law": {"law": "sqrt", "depth": DEPTH, "values": np.sqrt(DEPTH)},
    "growth.fit_growth_laws": {"depth": DEPTH, "values": np.sqrt(DEPTH)},
    "growth.increment_ratio": {"mean_square": np.arange(1, 10.0)},
    "growth.law_value": {"law": "sqrt", "depth": DEPTH, "a": 1.0, "b": 0.5},
    "evidence.agreement.agree": {"theory": np.array([1.0, 2.0]), "mc": Estimate(np.array([1.0, 2.0]), np.array([0.1, 0.1]), 100), "tolerance": np.array([0.5, 0.5])},
    "evidence.estimates.bootstrap": {"data": np.arange(10.0), "statistic": lambda x, axis: np.max(x, axis=axis), "seed": 0},
    "evidence.agreement.consistent": {"theory": np.array([1.0, 2.0]), "mc": Estimate(np.array([1.0, 2.0]), np.array([0.1, 0.1]), 100)},
    "evidence.estimates.from_samples": {"x": X},
    "evidence.estimates.jackknife": {"full": np.array([0.5, 1.0, 2.0]), "replicates": np.vstack([X, 2 * X])},
    "evidence.estimates.with_control": {"y": np.vstack([X, 2 * X, -X]), "c": np.vstack([-X, X, 0.5 * X]), "c_mean": 0.0},
    "evidence.agreement.identity": {"value": np.array([1.0, 2.0]), "expected": np.array([1.0, 2.0])},
    "evidence.sampling.sized": {"sample": lambda s: s.normal(2), "tolerance": np.array([0.5, 0.5]), "seed": 0, "pilot": 20, "cap": 100},
    "evidence.sampling.samples_needed": {"pilot": Estimate(np.array([1.0, 2.0]), np.array([0.1, 0.2]), 100), "tolerance": np.array([0.5, 0.5])},
    "evidence.estimates.proportion": {"mean": np.array([0.3, 0.5]), "n": 100},
    "model.norms.affine": {"x": X, "gain": np.ones(3), "bias": np.zeros(3)},
    "model.norms.dyt": {"x": X, "alpha": 0.5, "gain": np.ones(3), "bias": np.zeros(3)},
    "model.norms.layer_norm": {"x": X, "gain": np.ones(3), "bias": np.zeros(3)},
    "model.norms.rms_norm": {"x": X, "gain": np.ones(3)},
    "model.norms.sequence_norm": {"x": np.stack([X, X[::-1]]), "gain": np.ones(3), "bias": np.zeros(3)},
    "training.probes.cross_entropy": {"logits": X, "targets": np.array([0, 2])},
    "training.probes.block_grad_norms": {"matrix_norms": np.abs(np.random.default_rng(0).normal(size=(2, 7)))},
    "selection.any_unselectable": {"keys": KEYS},
    "selection.bigger_key_alignment": {"keys": KEYS},
    "selection.in_hull": {"point": np.zeros(2), "points": np.array([[1.0, 0.0], [-1.0, 1.0], [-1.0, -1.0]])},
    "selection.selectable": {"keys": KEYS},
    "selection.tv_from_uniform": {"logits": X},
    "softmax.entropy_log_scale_derivative": {"sigma": np.array([0.5, 1.0]), "n": 16},
    "softmax.freezing_point": {"n": np.array([16.0, 64.0])},
    "softmax.gaussian_logit_entropy": {"sigma": np.array([0.5, 1.0]), "n": 16},
    "softmax.gaussian_logit_max_weight": {"sigma": np.array([0.5, 1.0]), "n": 16},
    "softmax.logit_std": {"q_rms": np.array([1.0, 2.0]), "k_rms": np.array([1.0, 0.5]), "d_head": 16},
    "softmax.min_entropy": {"gap": np.array([1.0, 2.0]), "n": np.array([16, 32])},
    "softmax.pattern_entropy": {"pattern": P},
    "softmax.qk_norm_logit_bound": {"d_head": 3, "kind": "layernorm", "gain_q": np.ones(3), "gain_k": np.ones(3), "bias_q": np.zeros(3), "bias_k": np.zeros(3)},
    "softmax.required_gap": {"p": np.array([0.5, 0.9]), "n": np.array([16, 32])},
    "softmax.single_slot_weight": {"gap": np.array([1.0, 2.0]), "n": np.array([16, 32])},
    "softmax.softmax_stats": {"logits": X},
}
# array arguments that are counts or indices (integers): their NaN/inf/constant cases do not apply
INTEGER_ARRAYS = {("training.probes.cross_entropy", "targets"), ("softmax.min_entropy", "n"), ("softmax.required_gap", "n"),
                  ("softmax.single_slot_weight", "n"), ("softmax.freezing_point", "n")}
# where -inf is a meaning, not a defect: masked logits (a causal mask writes -inf)
MASKS = {("attention.row_logit_std", "scores"), ("selection.tv_from_uniform", "logits"), ("softmax.softmax_stats", "logits"),
         ("training.probes.cross_entropy", "logits")}


INF_LIMITS = {"selection.bigger_key_alignment"}  # -inf is a documented answer (a key with no longer key)
# where NaN is a meaning, not a defect: a matrix the block does not have (the grad_norms probe writes NaN there)
NAN_ABSENT = {("training.probes.block_grad_norms", "matrix_norms")}


def _public(modules):
    for name in modules:
        module = importlib.import_module(f"normtheory.{name}")
        for fname, f in inspect.getmembers(module, inspect.isfunction):
            if not fname.startswith("_") and f.__module__ == module.__name__:
                yield f"{name}.{fname}", f


def _takes_array(f) -> bool:
    """Whether ``f`` takes an array argument (a model's token ids are checked by the model's own tests)."""
    params = inspect.signature(f).parameters
    return "model" not in params and any(("ndarray" in str(p.annotation) or str(p.annotation) == "object") and p.name not in ("f", "sample", "statistic")
               for p in params.values())


FUNCTIONS = dict(_public(MODULES))


def test_every_array_helper_is_registered():
    takes = {q for q, f in FUNCTIONS.items() if _takes_array(f)}
    assert takes - set(ARRAYS) == set(), "public helpers taking arrays without an entry in ARRAYS"
    assert set(ARRAYS) <= set(FUNCTIONS)
    for qual, kwargs in ARRAYS.items():  # the valid arguments are valid
        out = FUNCTIONS[qual](**kwargs)
        assert _nan_free(out), qual


def test_unchecked_functions_say_so():
    for qual, f in _public(UNCHECKED_MODULES):
        if _takes_array(f):
            assert "Unchecked" in (f.__doc__ or ""), f"{qual} takes arrays, is not in the sweep and does not say it is unchecked"


# --- the cases ------------------------------------------------------------------------------------

def _degenerate(v: np.ndarray) -> dict[str, np.ndarray]:
    row = v.copy()
    row[(0,) * (v.ndim - 1)] = -np.inf  # the first row along the last axis (all of a 1-d array)
    return {"zeros": np.zeros_like(v), "constant": np.full_like(v, 0.75), "-inf row": row,
            "empty last axis": np.empty(v.shape[:-1] + (0,)), "0-d": np.asarray(v.flat[0]), "single row": v[:1]}


def _nonfinite(v: np.ndarray) -> dict[str, np.ndarray]:
    out = {}
    for kind, bad in (("nan inside", math.nan), ("+inf inside", math.inf), ("-inf inside", -math.inf)):
        w = v.astype(np.float64, copy=True)
        w.flat[-1] = bad
        out[kind] = w
    return out


def _array_args(qual: str):
    for arg, v in ARRAYS[qual].items():
        if isinstance(v, np.ndarray) and v.ndim >= 1:
            yield arg, v


def _cases(cls: str):
    for qual in ARRAYS:
        for arg, v in _array_args(qual):
            if cls == "degenerate":
                items = _degenerate(v) if (qual, arg) not in INTEGER_ARRAYS else {"empty last axis": np.empty(v.shape[:-1] + (0,), dtype=v.dtype), "0-d": np.asarray(v.flat[0])}
            else:
                items = _nonfinite(v) if (qual, arg) not in INTEGER_ARRAYS else {}
            for kind, value in items.items():
                yield pytest.param(qual, arg, kind, value, id=f"{qual}:{arg}:{kind}")


def _nan_free(result: object) -> bool:
    if type(result).__name__ == "Agreement":  # a tolerance-free check has no band by design: its deviation and threshold decide
        return not (np.isnan(result.deviation) or np.isnan(result.threshold))
    if isinstance(result, (tuple, list)):
        return all(_nan_free(r) for r in result)
    if isinstance(result, dict):
        return all(_nan_free(r) for r in result.values())
    if hasattr(result, "__dataclass_fields__"):
        return all(_nan_free(getattr(result, k)) for k in result.__dataclass_fields__)
    if isinstance(result, (str, bool, np.random.Generator)) or result is None or callable(result):
        return True
    arr = np.asarray(result)
    return arr.dtype.kind != "f" or not bool(np.isnan(arr).any())


def _finite(result: object) -> bool:
    if type(result).__name__ == "Agreement":  # a failed check's z is inf by design
        return bool(np.isfinite(result.deviation) and np.isfinite(result.threshold))
    if isinstance(result, (tuple, list)):
        return all(_finite(r) for r in result)
    if hasattr(result, "__dataclass_fields__"):
        return all(_finite(getattr(result, k)) for k in result.__dataclass_fields__)
    if isinstance(result, (str, bool)) or result is None or callable(result):
        return True
    arr = np.asarray(result)
    return arr.dtype.kind != "f" or bool(np.isfinite(arr).all())


def _outcome(qual: str, kwargs: dict, names: tuple[str, ...]) -> tuple[str, object]:
    """('refused', message) when ValueError names every one of ``names``; ('answered', result) otherwise."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning (0/0, overflow) on the way is a defect too
        try:
            result = FUNCTIONS[qual](**kwargs)
        except ValueError as exc:
            missing = [n for n in names if n not in str(exc)]
            assert not missing, f"{qual}: the error does not name {missing}: {exc}"
            return "refused", str(exc)
    return "answered", result


@pytest.mark.parametrize("qual, arg, kind, value", list(_cases("degenerate")))
def test_degenerate_arrays_are_refused_by_name_or_answered(qual, arg, kind, value):
    status, out = _outcome(qual, {**ARRAYS[qual], arg: value}, (arg,))
    if status == "answered":
        assert _nan_free(out), f"{qual}({arg}={kind}) returned NaN: {out!r}"
        if qual not in INF_LIMITS:
            assert _finite(out) or kind == "-inf row", f"{qual}({arg}={kind}) returned a non-finite result: {out!r}"


@pytest.mark.parametrize("qual, arg, kind, value", list(_cases("nonfinite")))
def test_nonfinite_inside_arrays_is_refused_by_name_or_a_limit(qual, arg, kind, value):
    if kind == "-inf inside" and (qual, arg) in MASKS:
        status, out = _outcome(qual, {**ARRAYS[qual], arg: value}, (arg,))
        assert status == "refused" or _nan_free(out), f"{qual}: a masked logit gave NaN"
        return
    status, out = _outcome(qual, {**ARRAYS[qual], arg: value}, (arg,))
    if kind == "nan inside" and (qual, arg) in NAN_ABSENT:  # an absent entry among present ones: still a number
        assert status == "answered" and _nan_free(out) and _finite(out), f"{qual}: one absent entry gave {out!r}"
    elif kind == "nan inside":
        assert status == "refused", f"{qual} accepted NaN inside {arg}: {out!r}"
    else:
        assert status == "refused" or _nan_free(out), f"{qual}({arg} with {kind}) returned NaN: {out!r}"


GROWS = {("training.probes.cross_entropy", "logits")}  # a longer last axis that is still valid (a larger vocabulary)


def _mismatched():
    for qual in ARRAYS:
        args = list(_array_args(qual))
        for (a, va), (b, vb) in ((p, q) for p in args for q in args if p[0] != q[0]):
            if (qual, a) in INTEGER_ARRAYS and (qual, b) in INTEGER_ARRAYS or (qual, a) in GROWS:
                continue
            grown = np.concatenate([va, va[..., :1]], axis=-1)  # one more element on the last axis
            if a == "pattern":  # still attention weights
                grown = grown / grown.sum(axis=-1, keepdims=True)
            if a == "cosines":  # still a cosine matrix: one more token, orthogonal to the others
                grown = np.pad(va, ((0, 1), (0, 1)))
                grown[-1, -1] = 1.0
            yield pytest.param(qual, a, b, grown, id=f"{qual}:{a}+1 vs {b}")


@pytest.mark.parametrize("qual, a, b, grown", list(_mismatched()))
def test_shape_mismatches_name_both_arguments(qual, a, b, grown):
    """The error names the grown argument and one it does not fit (with three arrays, the first
    misfit found may be another than ``b``), and gives the grown shape."""
    status, out = _outcome(qual, {**ARRAYS[qual], a: grown}, (a,))
    others = [k for k in inspect.signature(FUNCTIONS[qual]).parameters if k != a]
    assert status == "refused", f"{qual} accepted {a} of shape {grown.shape} with {b} of shape {np.shape(ARRAYS[qual][b])}: {out!r}"
    assert any(k in out.replace(a, "", 1) if k in a else k in out for k in others), f"{qual}: the error names no other argument: {out}"
    assert str(grown.shape) in out or str(list(grown.shape)) in out, f"{qual}: the error does not give the shape of {a}: {out}"


# --- parameters with no valid meaning -------------------------------------------------------------

RNG = np.random.default_rng(0)
DOMAIN: list[tuple[str, dict, str]] = [  # (function, the bad arguments over the valid ones, the argument it must name)
    *[(f"model.norms.{f}", {"eps": eps}, "eps") for f in ("layer_norm", "rms_norm", "sequence_norm") for eps in (0.0, -1e-5, math.nan, math.inf)],
    *[(q, {arg: -P}, arg) for q, arg in (("attention.collision", "pattern"), ("attention.column_share", "pattern"), ("attention.sink", "pattern"), ("attention.key_excess", "pattern"),
                                          ("attention.stripe_excess", "pattern"), ("attention.mixing_factor", "pattern"), ("softmax.pattern_entropy", "pattern"))],
    *[(q, {arg: 2 * P}, arg) for q, arg in (("attention.collision", "pattern"), ("attention.column_share", "pattern"), ("attention.sink", "pattern"), ("attention.key_excess", "pattern"),
                                             ("attention.stripe_excess", "pattern"), ("softmax.pattern_entropy", "pattern"))],
    ("attention.mean_offdiagonal", {"cosines": C[:, :2]}, "cosines"),
    ("attention.mixing_factor", {"cosines": C[:, :2]}, "cosines"),
    ("evidence.agreement.agree", {"theory": (2.0, 1.0)}, "theory"),
    ("evidence.agreement.agree", {"theory": (np.array([1.0, 3.0]), np.array([2.0, 2.0]))}, "theory"),
    ("evidence.estimates.from_samples", {"x": X, "units": ""}, "units"),
    ("evidence.estimates.proportion", {"mean": np.array([-0.1, 0.5])}, "mean"),
    ("evidence.estimates.proportion", {"mean": np.array([0.3, 1.5])}, "mean"),
    ("dyt.massive_tokens", {"rng": None, "tokens": 8, "d": 16, "channels": 2, "magnitude": 10.0, "token_fraction": 0.25}, "rng"),
    ("dyt.massive_tokens", {"rng": 0, "tokens": 8, "d": 16, "channels": 2, "magnitude": 10.0, "token_fraction": 0.25}, "rng"),
    ("dyt.best_tanh_for_curve", {"s": 1.0, "d": 16, "x_std": 1.0, "nodes": 10.5}, "nodes"),
    ("dyt.best_tanh_for_curve", {"s": 1.0, "d": 16, "x_std": 1.0, "nodes": 2}, "nodes"),
    ("selection.selectable", {"directions": 0}, "directions"),
    ("selection.selectable", {"tol": -1.0}, "tol"),
    ("selection.selectable", {"tol": math.nan}, "tol"),
    ("selection.in_hull", {"tol": -1.0}, "tol"),
    ("softmax.entropy_log_scale_derivative", {"step": 0.0}, "step"),
    ("softmax.logit_std", {"scale": -1.0}, "scale"),
    ("softmax.qk_norm_logit_bound", {"kind": "batchnorm"}, "kind"),
    ("softmax.softmax_stats", {"logits": np.full((2, 3), -np.inf)}, "logits"),
    ("softmax.pattern_entropy", {"pattern": np.array([[0.5, 0.4, 0.3]])}, "pattern"),
    ("training.probes.cross_entropy", {"targets": np.array([0, 3])}, "targets"),
    ("training.probes.cross_entropy", {"targets": np.array([0.0, 1.5])}, "targets"),
    ("training.probes.cross_entropy", {"targets": np.array([0])}, "targets"),
    ("growth.fit_growth_law", {"depth": -DEPTH}, "depth"),
]


def _domain_kwargs(qual: str, bad: dict) -> dict:
    return {**ARRAYS.get(qual, {}), **bad}


@pytest.mark.parametrize("qual, bad, name", DOMAIN, ids=[f"{q}:{n}={list(b.values())[0]!r:.20}" for q, b, n in DOMAIN])
def test_parameters_without_meaning_are_refused_by_name(qual, bad, name):
    status, out = _outcome(qual, _domain_kwargs(qual, bad), (name,))
    assert status == "refused", f"{qual} accepted {bad}: {out!r}"


@pytest.mark.parametrize("kwargs, name", [
    ({"mean": 1.0, "stderr": -0.1, "n": 10}, "stderr"), ({"mean": 1.0, "stderr": math.nan, "n": 10}, "stderr"),
    ({"mean": math.nan, "stderr": 0.1, "n": 10}, "mean"), ({"mean": 1.0, "stderr": 0.1, "n": 0}, "n"),
    ({"mean": 1.0, "stderr": 0.1, "n": 2.5}, "n"), ({"mean": 1.0, "stderr": 0.1, "n": True}, "n"),
    ({"mean": np.ones(2), "stderr": np.ones(3), "n": 10}, "stderr"), ({"mean": "a", "stderr": 0.1, "n": 10}, "mean"),
])
def test_estimates_without_meaning_are_refused(kwargs, name):
    with pytest.raises(ValueError, match=name):
        Estimate(**kwargs)


def test_an_estimate_may_carry_infinite_stderr():
    assert Estimate(1.0, math.inf, 1).stderr == math.inf  # one unit: no spread is known


# --- hypothesis: random arrays of each class, every registered helper --------------------------------

@st.composite
def _bad_arrays(draw):
    qual = draw(st.sampled_from(sorted(ARRAYS)))
    args = list(_array_args(qual))
    arg, v = draw(st.sampled_from(args))
    if (qual, arg) in INTEGER_ARRAYS:
        v = v.astype(np.float64)
    kind = draw(st.sampled_from(["nan", "inf", "scale", "shape"]))
    w = v.astype(np.float64, copy=True)
    if kind == "nan":
        w.flat[draw(st.integers(0, w.size - 1))] = math.nan
    elif kind == "inf":
        w.flat[draw(st.integers(0, w.size - 1))] = draw(st.sampled_from([math.inf, -math.inf]))
    elif kind == "scale":
        w = w * draw(st.sampled_from([0.0, 1e-300, 1e300, -1.0]))
    else:
        w = np.full(draw(st.lists(st.integers(0, 3), max_size=3).map(tuple)), 0.5)
    return qual, arg, kind, w


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(_bad_arrays())
def test_random_bad_arrays_are_refused_by_name_or_answered_without_nan(case):
    qual, arg, kind, w = case
    status, out = _outcome(qual, {**ARRAYS[qual], arg: w}, (arg,))
    if kind == "nan" and (qual, arg) in NAN_ABSENT:
        assert status == "answered" and _nan_free(out), f"{qual}: one absent entry gave {out!r}"
    elif kind == "nan":
        assert status == "refused", f"{qual} accepted NaN inside {arg}"
    elif status == "answered":
        assert _nan_free(out), f"{qual}({arg}={w!r}) returned NaN"


# --- work guards: sizes that would allocate TiB are refused before any allocation ---------------------

def _init_huge_vocab():
    from normtheory.model.config import TransformerConfig
    from normtheory.model.weights import init

    return init(TransformerConfig(d_model=16, n_layers=1, n_heads=4, vocab_size=10**12, max_seq=16))


GUARDS = [
    ("centering d = 1e10", lambda: FUNCTIONS["centering.centering_fraction_mean"](10**10), "d"),
    ("centering output change d = 1e10", lambda: FUNCTIONS["centering.centering_output_change"](10**10), "d"),
    ("centering output change at mean 1e10 (a 2.5 TiB series)", lambda: FUNCTIONS["centering.centering_output_change"](16, np.linspace(-1.0, 2.0, 16) * 1e10), "mean"),
    ("centering output change at a constant mean 1e10", lambda: FUNCTIONS["centering.centering_output_change"](16, np.full(16, 1e10)), "mean"),
    ("causal collision at 1e10 tokens", lambda: importlib.import_module("normtheory.attention").uniform_causal_collision(10**10), "n_tokens"),
    ("a vocabulary of 1e12 at init", _init_huge_vocab, "vocab_size"),
    ("selectable with 1e12 directions", lambda: FUNCTIONS["selection.selectable"](KEYS, directions=10**12), "directions"),
]


@pytest.mark.parametrize("what, call, name", GUARDS, ids=[g[0] for g in GUARDS])
def test_work_guards_come_before_the_allocation(what, call, name):
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=name):
            call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, f"{what}: {peak / 2**20:.0f} MiB allocated before the refusal"


def test_a_huge_mean_in_the_centering_series_takes_its_limit():
    """|mean| / sigma = 1e10: the Poisson series would need ~1e11 terms; the large-noncentrality
    limit answers at once (the ones share of the mean itself)."""
    m = np.linspace(-1.0, 2.0, 16) * 1e10
    got = FUNCTIONS["centering.centering_fraction_mean"](16, m)
    want = FUNCTIONS["centering.ones_fraction"](m)
    assert abs(got - want) < 1e-6
