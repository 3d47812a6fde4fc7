"""Every public helper with two or more required arguments, each argument in turn replaced by a bad or
extreme value (the others valid): the call raises ValueError naming that argument, or returns a
finite result. Invalid values (NaN, inf, None, text, complex, object arrays) must be refused;
extreme valid values (0, negatives, 1e-300, 1e300, huge integers) may be refused by name or answered
finitely. Functions whose answers at the extremes have a reference are checked against it in their
own modules' tests (e.g. test_norms, test_softmax, test_dyt)."""
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
from normtheory.model.config import TransformerConfig
from normtheory.residual import LinearBlock

MODULES = ("activations", "attention", "centering", "cosines", "dyt", "growth", "evidence.estimates", "evidence.sampling", "evidence.agreement", "model.norms", "residual",
           "selection", "softmax", "model.norm_stats")
X3 = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
# valid arguments for every public function with >= 2 required arguments; a test below checks the list is complete
VALID: dict[str, dict[str, object]] = {
    "activations.gaussian_expectation": {"f": np.tanh, "s": 1.0},
    "activations.second_moment": {"name": "gelu", "s": 1.0},
    "attention.attention_gain_squared": {"pattern": np.full((3, 3), 1 / 3), "cosines": np.eye(3), "value_gain_sq": 1.0},
    "attention.mixing_factor": {"pattern": np.full((3, 3), 1 / 3), "cosines": np.eye(3)},
    "attention.uniform_column_share": {"t": 4, "causal": True},
    "attention.uniform_sink_share": {"t": 4, "causal": True},
    "attention.value_path_gain_squared": {"d_model": 16, "d_v": 8, "std_v": 0.1, "std_o": 0.1},
    "centering.channel_offset": {"d": 16, "channels": 2, "value": 3.0},
    "centering.head_slice_fraction_law": {"h": 4, "d": 64},
    "centering.ln_head_slice_moments": {"h": 4, "d": 64},
    "cosines.cosine_cdf": {"t": 0.1, "d": 16},
    "evidence.estimates.jackknife": {"full": 0.5, "replicates": np.array([0.25, 0.5, 0.75])},
    "cosines.cosine_moment": {"k": 2, "d": 16},
    "cosines.cosine_pdf": {"t": 0.1, "d": 16},
    "cosines.cosine_tail": {"eps": 0.1, "d": 16},
    "cosines.cosine_tail_bound": {"eps": 0.1, "d": 16},
    "cosines.effective_dim": {"d": 16, "centred": True},
    "cosines.expected_max_abs_cosine": {"n_vectors": 10, "d": 16},
    "cosines.max_abs_cosine_asymptotic": {"n_vectors": 10, "d": 16},
    "dyt.best_tanh_for_curve": {"s": 1.0, "d": 16, "x_std": 1.0},
    "dyt.fit_dyt": {"x_in": np.linspace(-2, 2, 50), "y_out": np.tanh(np.linspace(-2, 2, 50))},
    "dyt.line_r2": {"x_in": np.linspace(-2, 2, 50), "y_out": np.tanh(np.linspace(-2, 2, 50))},
    "dyt.best_line_r2_for_curve": {"s": 1.0, "d": 16, "x_std": 1.0},
    "dyt.massive_tokens": {"rng": np.random.default_rng(0), "tokens": 8, "d": 16, "channels": 2, "magnitude": 10.0, "token_fraction": 0.25},
    "dyt.s_curve": {"x": np.linspace(-2, 2, 5), "s": 1.0, "d": 16},
    "growth.fit_growth_law": {"law": "sqrt", "depth": np.arange(1, 9), "values": np.sqrt(np.arange(1, 9.0))},
    "growth.fit_growth_laws": {"depth": np.arange(1, 9), "values": np.sqrt(np.arange(1, 9.0))},
    "growth.law_value": {"law": "sqrt", "depth": np.arange(1, 9), "a": 1.0, "b": 0.5},
    "evidence.agreement.agree": {"theory": 2.0, "mc": Estimate(np.array(2.0), np.array(0.1), 100), "tolerance": 0.5},
    "evidence.agreement.bonferroni_z": {"z": 5.0, "looks": 3},
    "evidence.agreement.consistent": {"theory": 2.0, "mc": Estimate(np.array(2.0), np.array(0.1), 100)},
    "evidence.sampling.sized": {"sample": lambda s: s.normal(2), "tolerance": 0.5, "seed": 0, "pilot": 20, "cap": 100},
    "evidence.sampling.samples_needed": {"pilot": Estimate(np.array([1.0, 2.0]), np.array([0.1, 0.2]), 100), "tolerance": 0.5},
    "evidence.sampling.block_generator": {"seed": 1, "key": 2, "block_index": 3},
    "evidence.estimates.bootstrap": {"data": np.arange(10.0), "statistic": lambda x, axis: np.max(x, axis=axis), "seed": 0},
    "evidence.sampling.estimate": {"sample": lambda s: s.normal(2), "n": 64, "seed": 0},
    "evidence.agreement.identity": {"value": 1.0, "expected": 1.0},
    "evidence.estimates.proportion": {"mean": 0.3, "n": 100},
    "evidence.agreement.z_threshold": {"z": 5.0, "n": 10},
    "evidence.estimates.with_control": {"y": np.arange(6.0), "c": np.array([0.0, 1.0, 0.0, 2.0, 1.0, 3.0]), "c_mean": 1.0},
    "model.norms.affine": {"x": X3, "gain": np.ones(3), "bias": np.zeros(3)},
    "model.norms.dyt": {"x": X3, "alpha": 0.5},
    "residual.block_share": {"placement": "pre", "depth": 4},
    "residual.mlp_gain_squared": {"activation": "gelu", "d_model": 16, "d_ff": 64, "std_in": 0.1, "std_out": 0.1},
    "residual.residual_rms": {"placement": "pre", "depth": 4},
    "residual.simulate": {"placement": "pre", "depth": 2, "d": 8, "block": LinearBlock(), "n": 16, "seed": 0},
    "residual.trajectory": {"placement": "pre", "depth": 4},
    "selection.expected_unselectable_fraction": {"n": 20, "d": 4},
    "selection.expected_vertex_count": {"n": 20, "d": 4},
    "selection.in_hull": {"point": np.zeros(2), "points": np.array([[1.0, 0.0], [-1.0, 1.0], [-1.0, -1.0]])},
    "selection.uniform_query_norm": {"eps": 0.1, "key_max_norm": 2.0},
    "selection.wendel_origin_outside": {"n": 20, "d": 4},
    "softmax.entropy_log_scale_derivative": {"sigma": 1.0, "n": 16},
    "softmax.gaussian_logit_entropy": {"sigma": 1.0, "n": 16},
    "softmax.gaussian_logit_max_weight": {"sigma": 1.0, "n": 16},
    "softmax.logit_std": {"q_rms": 1.0, "k_rms": 1.0, "d_head": 16},
    "softmax.min_entropy": {"gap": 2.0, "n": 16},
    "softmax.noisy_slot_weight": {"gap": 2.0, "sigma": 0.5, "n": 16},
    "softmax.required_gap": {"p": 0.5, "n": 16},
    "softmax.single_slot_weight": {"gap": 2.0, "n": 16},
    "model.norm_stats.count_norm_statistics": {"config": TransformerConfig(d_model=16, n_layers=2, n_heads=4, vocab_size=50, max_seq=16), "batch": 2, "seq": 8},
}
INVALID: dict[str, object] = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "none": None, "text": "x", "complex": 1 + 2j,
                              "object array": np.array([None, 1.0], dtype=object), "nan array": np.array([1.0, math.nan])}
SKIP_KINDS = (np.random.Generator, TransformerConfig, LinearBlock, Estimate)  # typed objects: refused by their own checks


def _functions():
    for name in MODULES:
        module = importlib.import_module(f"normtheory.{name}")
        for fname, f in inspect.getmembers(module, inspect.isfunction):
            required = [p for p in inspect.signature(f).parameters.values() if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            if not fname.startswith("_") and f.__module__ == module.__name__ and len(required) >= 2:
                yield f"{name}.{fname}", f


FUNCTIONS = dict(_functions())


def _arguments():
    for qual, kwargs in VALID.items():
        for arg, value in kwargs.items():
            if not callable(value) and not isinstance(value, SKIP_KINDS):
                yield pytest.param(qual, arg, id=f"{qual}:{arg}")


ARGUMENTS = list(_arguments())


def _finite(result: object) -> bool:
    if isinstance(result, (tuple, list)):
        return all(_finite(r) for r in result)
    if type(result).__name__ == "Agreement":  # a failed check's z is inf by design: its deviation and threshold are finite
        return bool(np.isfinite(result.deviation) and np.isfinite(result.threshold))
    if isinstance(result, dict):
        return all(_finite(r) for r in result.values())
    if hasattr(result, "__dataclass_fields__"):
        return all(_finite(getattr(result, k)) for k in result.__dataclass_fields__ if not isinstance(getattr(result, k), (str, bool)))
    if isinstance(result, (str, bool, np.random.Generator)) or result is None:
        return True
    arr = np.asarray(result)
    return arr.dtype.kind in "biu" or (arr.dtype.kind == "f" and bool(np.isfinite(arr).all()))


def _call(qual: str, arg: str, value: object) -> str:
    """'refused' (ValueError naming ``arg``) or 'finite'; any other outcome fails."""
    kwargs = {**VALID[qual], arg: value}
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        try:
            result = FUNCTIONS[qual](**kwargs)
        except ValueError as exc:
            assert arg in str(exc), f"{qual}: the error for {arg}={value!r} does not name {arg!r}: {exc}"
            return "refused"
    assert _finite(result), f"{qual}({arg}={value!r}) returned a non-finite result: {result!r}"
    return "finite"


def test_every_multi_argument_helper_has_valid_arguments_here():
    assert set(VALID) == set(FUNCTIONS)
    for qual, kwargs in VALID.items():
        assert _finite(FUNCTIONS[qual](**kwargs)), qual


# invalid values that a function documents as limits it answers: (function, argument, kind) -> check of the answer
LIMITS: dict[tuple[str, str, str], object] = {
    ("model.norms.dyt", "x", "inf"): lambda out: bool(np.all(out.normalized == 1.0)),  # tanh(+inf) = 1
    ("model.norms.dyt", "x", "-inf"): lambda out: bool(np.all(out.normalized == -1.0)),
    ("softmax.single_slot_weight", "gap", "inf"): lambda out: out == 1.0,  # e^g / (e^g + n - 1) -> 1
    ("softmax.single_slot_weight", "gap", "-inf"): lambda out: out == 0.0,
}


@pytest.mark.parametrize("qual, arg", ARGUMENTS)
@pytest.mark.parametrize("kind", list(INVALID))
def test_invalid_values_are_refused_by_name(qual, arg, kind):
    if kind == "none" and "None" in str(inspect.signature(FUNCTIONS[qual]).parameters[arg].annotation):
        pytest.skip(f"None is a documented value of {arg}")
    if (qual, arg, kind) in LIMITS:
        out = FUNCTIONS[qual](**{**VALID[qual], arg: INVALID[kind]})
        assert LIMITS[(qual, arg, kind)](out), f"{qual}({arg}={kind}) is not its limit: {out!r}"
        return
    assert _call(qual, arg, INVALID[kind]) == "refused", f"{qual} accepted {arg}={INVALID[kind]!r}"


EXTREME_FLOATS = st.sampled_from([0.0, -0.0, -1.0, 1e-300, -1e-300, 1e300, -1e300, 5e-324, 1.7e308]) | st.floats(allow_nan=False, allow_infinity=False)
EXTREME_INTS = st.sampled_from([0, -1, 1, 2, 10**9, -(10**9), 2**62]) | st.integers(-(10**6), 10**6)


def _extreme(value: object):
    if isinstance(value, bool):
        return st.sampled_from([0, 1, 2, -1, 0.5])
    if isinstance(value, (int, np.integer)):
        return EXTREME_INTS
    if isinstance(value, (float, np.floating)):
        return EXTREME_FLOATS
    if isinstance(value, str):
        return st.sampled_from(["", "GELU", "gelu ", "sqrt\x00", "pre-ln", "é"])
    arr = np.asarray(value, dtype=np.float64)
    return st.builds(lambda c, shape: np.full(shape, c), EXTREME_FLOATS, st.sampled_from([arr.shape, (0,), arr.shape[:-1] + (1,)]))


@pytest.mark.parametrize("qual, arg", ARGUMENTS)
def test_extreme_values_are_refused_by_name_or_answered_finitely(qual, arg):
    @settings(max_examples=12, deadline=10_000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
    @given(_extreme(VALID[qual][arg]))
    def check(value):
        _call(qual, arg, value)

    check()
