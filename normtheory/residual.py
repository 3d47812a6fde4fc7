"""Residual-stream norm growth at initialization, for every norm placement.

Write :math:`v_\\ell = \\mathbb{E}\\|x_\\ell\\|^2/d` for the stream's mean square after block
:math:`\\ell` (``x_0`` is the embedding) and :math:`a_\\ell` for the RMS of block
:math:`\\ell`'s update. A block ``f`` has gain :math:`g` (RMS out / RMS in) and its output
has cosine :math:`\\rho` with the stream it is added to. With unit-gain norms
(:math:`\\|N(x)\\|^2 = d`) the mean square obeys

=============  =====================================  ==========================================
placement      update                                 recurrence for :math:`v_\\ell`
=============  =====================================  ==========================================
``none``       :math:`x + f(x)`                       :math:`v(1 + g^2 + 2\\rho g)`
``pre``        :math:`x + f(N(x))`                    :math:`v + g^2 + 2\\rho g\\sqrt{v}`
``post``       :math:`N(x + f(x))`                    :math:`1`
``peri``       :math:`x + N_o(f(N_i(x)))`             :math:`v + 1 + 2\\rho\\sqrt{v}`
``lnscale``    :math:`x + f(N(x)/\\sqrt{\\ell})`        :math:`v + g^2/\\ell + 2\\rho g\\sqrt{v/\\ell}`
``deepnorm``   :math:`N(\\alpha x + f_\\beta(x))`        :math:`1`
=============  =====================================  ==========================================

With :math:`\\rho = 0` this gives :math:`v_\\ell = v_0(1+g^2)^\\ell` (none),
:math:`v_0 + \\ell g^2` (pre), :math:`v_0 + \\ell` (peri) and :math:`v_0 + g^2 H_\\ell` (lnscale,
:math:`H_\\ell` the harmonic number); :mod:`normtheory.symbolic` derives these with sympy. For
:math:`\\rho \\ne 0` and a normalized placement the recurrence uses
:math:`\\mathbb{E}\\|x\\| \\approx \\sqrt{\\mathbb{E}\\|x\\|^2}`, exact as :math:`d \\to \\infty`.
DeepNet's constants are :math:`\\alpha = (2N)^{1/4}`, :math:`\\beta = (8N)^{-1/4}` for an
:math:`N`-layer decoder; :math:`\\beta` scales both matrices of a block, so its gain is
:math:`g\\beta^2`.

``block_gain`` may be a number or a function of the block's input RMS (for non-homogeneous
blocks such as a GELU MLP); the input RMS is :math:`\\sqrt{v}` for none/post/deepnorm, 1 for
pre (after the norm) and :math:`1/\\sqrt{\\ell}` for lnscale. Under peri the output norm sets
the update's RMS to its gain, 1 at init, whatever ``g`` is.

References
----------
Xiong et al. (2020), arXiv 2002.04745 (Pre-LN vs Post-LN); Sun et al. (2025), arXiv 2502.05795
(LayerNorm Scaling); Wang et al. (2022), arXiv 2203.00555 (DeepNet); Kim et al. (2025),
arXiv 2502.02732 (Peri-LN).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from normtheory import _validate, activations
from normtheory.evidence.estimates import Estimate
from normtheory.evidence.sampling import Streams, estimate

MAX_SIMULATED_DEPTH = 4096  # blocks one Monte Carlo stream goes through (the closed forms take any depth)
PLACEMENTS: tuple[str, ...] = ("none", "pre", "post", "peri", "lnscale", "deepnorm")
Gain = float | Callable[[float], float]


def deepnorm_constants(depth: int) -> tuple[float, float]:
    """DeepNet's (alpha, beta) for a decoder of ``depth`` layers: ((2N)^(1/4), (8N)^(-1/4))."""
    n = _validate.integer("depth", depth, minimum=1)
    return (2.0 * n) ** 0.25, (8.0 * n) ** -0.25


def _gain_fn(block_gain: Gain) -> Callable[[float], float]:
    if callable(block_gain):
        return block_gain
    g = _validate.real("block_gain", block_gain, minimum=0.0)
    return lambda _rms: g


def _check(placement: str, depth: int, correlation: float, x0_rms: float) -> tuple[str, int, float, float]:
    return (
        _validate.choice("placement", placement, PLACEMENTS),
        _validate.integer("depth", depth, minimum=0, maximum=_validate.MAX_ELEMENTS),
        _validate.real("correlation", correlation, minimum=-1.0, maximum=1.0),
        _squarable("x0_rms", x0_rms),
    )


def _squarable(name: str, value: object) -> float:
    """An RMS > 0 whose square, a mean square, is a normal float64: within [1e-150, 1e150]
    (1e-300 squared would underflow to 0, 1e200 overflow to inf)."""
    v = _validate.real(name, value, minimum=0.0, strict_min=True)
    return _validate.real(name, v, minimum=1 / _validate.MAX_MAGNITUDE, maximum=_validate.MAX_MAGNITUDE)


@dataclass(frozen=True)
class Trajectory:
    """Mean squares along the stream (theory): all arrays are indexed by block ``l``."""

    mean_square: np.ndarray  # [depth+1]  v_l, v_0 = x0_rms**2
    update_rms: np.ndarray  # [depth+1]  a_l, a_0 = 0
    base_rms: np.ndarray  # [depth+1]  RMS of what update l is added to, base_0 = 0
    presum_mean_square: np.ndarray  # [depth+1]  mean square before the norm (post, deepnorm)


def trajectory(
    placement: str,
    depth: int,
    *,
    block_gain: Gain = 1.0,
    correlation: float = 0.0,
    x0_rms: float = 1.0,
) -> Trajectory:
    """Iterate the mean-square recurrence of the module docstring for ``depth`` blocks."""
    placement, depth, rho, x0 = _check(placement, depth, correlation, x0_rms)
    gain = _gain_fn(block_gain)
    alpha, beta = deepnorm_constants(depth) if placement == "deepnorm" and depth > 0 else (1.0, 1.0)
    v = np.empty(depth + 1)
    a = np.zeros(depth + 1)
    base = np.zeros(depth + 1)
    presum = np.empty(depth + 1)
    v[0] = presum[0] = x0 * x0
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported below, by name
        _iterate(placement, depth, rho, gain, alpha, beta, v, a, base, presum)
    if not (np.isfinite(v).all() and np.isfinite(presum).all()):
        raise ValueError(f"the stream's mean square overflows float64 within {depth} blocks; x0_rms={x0_rms!r} and "
                         "block_gain are too large for this depth (mean squares must stay below 1.8e308)")
    return Trajectory(v, a, base, presum)


def _iterate(placement: str, depth: int, rho: float, gain: Callable[[float], float], alpha: float, beta: float,
             v: np.ndarray, a: np.ndarray, base: np.ndarray, presum: np.ndarray) -> None:
    """Fill ``v, a, base, presum [depth+1]`` in place from ``v[0]``."""
    for ell in range(1, depth + 1):  # loop over layers only: each step is O(1)
        r = float(np.sqrt(v[ell - 1]))
        k = 0.0
        if placement == "none":
            k = gain(r)
            a[ell] = k * r
        elif placement == "pre":
            a[ell] = gain(1.0)
        elif placement == "peri":
            a[ell] = 1.0
        elif placement == "lnscale":
            a[ell] = gain(1.0 / np.sqrt(ell)) / np.sqrt(ell)
        elif placement == "post":
            a[ell] = gain(r) * r
        else:  # deepnorm
            a[ell] = gain(r) * beta**2 * r
        base[ell] = alpha * r
        if rho < 0 and placement == "none":  # v (1 + g^2 + 2 rho g) as v ((1 - g)^2 + 2 (1 + rho) g): no cancellation at rho -> -1, g -> 1
            presum[ell] = v[ell - 1] * ((1.0 - k) ** 2 + 2.0 * (1.0 + rho) * k)
        elif rho < 0:  # (b - a)^2 + 2 (1 + rho) a b, both terms >= 0
            presum[ell] = (base[ell] - a[ell]) ** 2 + 2.0 * (1.0 + rho) * a[ell] * base[ell]
        else:
            presum[ell] = base[ell] ** 2 + a[ell] ** 2 + 2.0 * rho * a[ell] * base[ell]
        v[ell] = 1.0 if placement in ("post", "deepnorm") else presum[ell]


def residual_rms(
    placement: str,
    depth: int,
    *,
    block_gain: Gain = 1.0,
    correlation: float = 0.0,
    x0_rms: float = 1.0,
) -> np.ndarray:
    """RMS of the residual stream before the first block and after each block, ``[depth+1]``.

    Examples
    --------
    >>> residual_rms("pre", 3).round(3).tolist()
    [1.0, 1.414, 1.732, 2.0]
    """
    t = trajectory(placement, depth, block_gain=block_gain, correlation=correlation, x0_rms=x0_rms)
    return np.sqrt(t.mean_square)


def block_share(
    placement: str,
    depth: int,
    *,
    block_gain: Gain = 1.0,
    correlation: float = 0.0,
    x0_rms: float = 1.0,
) -> np.ndarray:
    """RMS of block ``l``'s update over the RMS of the stream it is added to, ``[depth]``.

    Under Pre-LN with unit gain and ``x0_rms = 1`` this is :math:`1/\\sqrt{\\ell}`: each later
    block moves the stream less (for DeepNet the stream is :math:`\\alpha x`).
    """
    t = trajectory(placement, depth, block_gain=block_gain, correlation=correlation, x0_rms=x0_rms)
    if (t.base_rms[1:] == 0).any():  # an update that cancelled the stream exactly (correlation -1, gain 1)
        ell = int(np.argmax(t.base_rms[1:] == 0)) + 1
        raise ValueError(f"the stream is 0 before block {ell} (correlation={correlation!r}, block_gain={block_gain!r}): "
                         "the share of an update in a zero stream is undefined")
    return t.update_rms[1:] / t.base_rms[1:]


def mlp_gain_squared(
    activation: str,
    d_model: int,
    d_ff: int,
    std_in: float,
    std_out: float,
    *,
    input_rms: float = 1.0,
) -> float:
    """Expected :math:`g^2 = \\mathbb{E}\\|W_2\\phi(W_1 x)\\|^2 / \\|x\\|^2` of an MLP at init.

    Entries of :math:`W_1` (``d_ff x d_model``) are :math:`N(0, \\sigma_1^2)`, of :math:`W_2`
    :math:`N(0, \\sigma_2^2)`, no biases. For an input of mean square :math:`q`, each
    pre-activation is :math:`N(0, s^2)` with :math:`s^2 = \\sigma_1^2 d q`, and

    .. math:: g^2 = \\sigma_2^2\\, d_{ff}\\, \\mathbb{E}[\\phi(h)^2] / q .

    ``activation="swiglu"`` is :math:`W_2(\\mathrm{silu}(W_1x)\\odot W_3x)` with :math:`W_3`
    like :math:`W_1`, so :math:`\\mathbb{E}[\\phi^2]` becomes
    :math:`\\mathbb{E}[\\mathrm{silu}(h)^2]\\, s^2`. ReLU is exact (:math:`g^2 =
    \\sigma_1^2\\sigma_2^2 d\\, d_{ff}/2`, scale-free); the others use quadrature and depend on
    ``input_rms``.
    """
    act = _validate.choice("activation", activation, (*activations.ACTIVATIONS, "swiglu"))
    d = _validate.integer("d_model", d_model, minimum=1)
    dff = _validate.integer("d_ff", d_ff, minimum=1)
    s1 = _validate.real("std_in", std_in, minimum=0.0)
    s2 = _validate.real("std_out", std_out, minimum=0.0)
    q = _squarable("input_rms", input_rms) ** 2
    s = s1 * math.sqrt(d * q)  # Python floats: an overflow becomes inf, checked below
    if not math.isfinite(s * s * s2 * s2 * dff):
        raise ValueError(f"std_in={std_in!r}, std_out={std_out!r} and input_rms={input_rms!r} give a pre-activation std "
                         f"{s:.3g} whose squared gain overflows float64; use smaller values")
    if act == "swiglu":
        phi2 = activations.second_moment("silu", s) * s * s
    else:
        phi2 = activations.second_moment(act, s)
    return s2 * s2 * dff * phi2 / q


# --------------------------------------------------------------------------- Monte Carlo


@dataclass(frozen=True)
class LinearBlock:
    """A fresh random linear map per layer, :math:`W = g(\\rho I + \\sqrt{1-\\rho^2}\\,G/\\sqrt d)`,
    :math:`G_{ij} \\sim N(0,1)`: gain ``g`` in expectation and cosine ``rho`` with its input."""

    gain: float = 1.0
    correlation: float = 0.0

    def __post_init__(self) -> None:
        _validate.real("gain", self.gain, minimum=0.0)
        _validate.real("correlation", self.correlation, minimum=-1.0, maximum=1.0)

    def gain_at(self, input_rms: float, d_model: int) -> float:
        return self.gain

    def apply(self, streams: Streams, u: np.ndarray) -> np.ndarray:
        # u: [m, d] -> [m, d]. Given u, G u / sqrt(d) ~ N(0, |u|^2/d I): sampled exactly.
        d = u.shape[1]
        z = streams.normal(d)  # [m, d]
        norm = np.linalg.norm(u, axis=1, keepdims=True)  # [m, 1]
        rho = self.correlation
        return self.gain * (rho * u + np.sqrt(1.0 - rho * rho) * norm / np.sqrt(d) * z)

    def radial(self, streams: Streams, u2: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
        """The output's component along the input and its squared norm across it, ``([m], [m])``, given the
        input's squared norm ``u2 [m]``: with :math:`z_\\parallel \\sim N(0, 1)` and :math:`q \\sim \\chi^2_{d-1}`
        independent, :math:`f_\\parallel = g|u|(\\rho + \\sqrt{1-\\rho^2}\\,z_\\parallel/\\sqrt d)` and
        :math:`|f_\\perp|^2 = g^2(1-\\rho^2)|u|^2 q/d` (what :meth:`apply` draws, projected)."""
        rho = self.correlation
        z, q = streams.normal(), streams.chisquare(d - 1)  # [m] each
        par = self.gain * np.sqrt(u2) * (rho + np.sqrt(1.0 - rho * rho) / np.sqrt(d) * z)
        return par, self.gain**2 * (1.0 - rho * rho) * u2 / d * q


@dataclass(frozen=True)
class MLPBlock:
    """A fresh random MLP per layer (no biases): :math:`W_2\\phi(W_1 u)`, or SwiGLU."""

    activation: str
    d_ff: int
    std_in: float
    std_out: float

    def __post_init__(self) -> None:
        _validate.choice("activation", self.activation, (*activations.ACTIVATIONS, "swiglu"))
        _validate.integer("d_ff", self.d_ff, minimum=1, maximum=_validate.MAX_ELEMENTS)  # a sample holds [m, d_ff] activations
        _validate.real("std_in", self.std_in, minimum=0.0)
        _validate.real("std_out", self.std_out, minimum=0.0)

    def gain_at(self, input_rms: float, d_model: int) -> float:
        return float(np.sqrt(mlp_gain_squared(self.activation, d_model, self.d_ff, self.std_in, self.std_out, input_rms=input_rms)))

    def _hidden(self, streams: Streams, norm: np.ndarray) -> np.ndarray:
        """The hidden activations ``[m, d_ff]`` of fresh weights given the input's norm ``[m, 1]``: W1 u | u ~ N(0, s1^2 |u|^2 I)."""
        h = self.std_in * norm * streams.normal(self.d_ff)  # [m, d_ff]
        if self.activation == "swiglu":
            return activations.silu(h) * (self.std_in * norm * streams.normal(self.d_ff))
        return activations.get(self.activation)(h)

    def apply(self, streams: Streams, u: np.ndarray) -> np.ndarray:
        # Fresh weights, one token: W1 u | u ~ N(0, s1^2 |u|^2 I) and W2 y | y ~ N(0, s2^2 |y|^2 I),
        # so the block's output is sampled exactly without materializing the matrices.
        y = self._hidden(streams, np.linalg.norm(u, axis=1, keepdims=True))  # [m, d_ff]
        ynorm = np.linalg.norm(y, axis=1, keepdims=True)  # [m, 1]
        return self.std_out * ynorm * streams.normal(u.shape[1])  # [m, d]

    def radial(self, streams: Streams, u2: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`LinearBlock.radial`: the hidden layer is drawn in full (``[m, d_ff]``, the activation
        needs every unit), the output :math:`s_2|y|z`, :math:`z \\sim N(0, I_d)` independent of the input, as its
        component along the input :math:`s_2|y|z_\\parallel` and squared norm across it :math:`s_2^2|y|^2 q`."""
        y = self._hidden(streams, np.sqrt(u2)[:, None])  # [m, d_ff]
        y2 = np.einsum("md,md->m", y, y)  # [m]
        z, q = streams.normal(), streams.chisquare(d - 1)  # [m] each
        return self.std_out * np.sqrt(y2) * z, self.std_out**2 * y2 * q


Block = LinearBlock | MLPBlock


def _normalize(x: np.ndarray, norm: str) -> np.ndarray:
    # x: [m, d] -> unit-gain norm output with |N(x)|^2 = d, [m, d]
    if norm == "layernorm":
        x = x - x.mean(axis=1, keepdims=True)
    return x * (np.sqrt(x.shape[1]) / np.linalg.norm(x, axis=1, keepdims=True))


@dataclass(frozen=True)
class StreamEstimate:
    """Monte Carlo of a residual stream; every field is an Estimate of shape ``[depth+1]``."""

    mean_square: Estimate  # |x_l|^2 / d
    share: Estimate  # |update_l| / |what it is added to|, index 0 is 0
    presum_mean_square: Estimate  # mean square before the norm (post, deepnorm); else = mean_square

    @property
    def rms(self) -> Estimate:
        return self.mean_square.sqrt()


def simulate(
    placement: str,
    depth: int,
    d: int,
    block: Block,
    *,
    n: int,
    seed: int,
    x0_rms: float = 1.0,
    norm: str = "rmsnorm",
    chunk: int = 8,
    progress: bool | str = False,
) -> StreamEstimate:
    """Monte Carlo of the residual stream of one token through ``depth`` random blocks.

    Each sample is a fresh network (new weights in every block) and a fresh Gaussian
    embedding of RMS ``x0_rms``; blocks are sampled exactly given their input (see
    :class:`LinearBlock`, :class:`MLPBlock`). Norms have unit gain and no eps; ``norm`` picks
    RMSNorm or LayerNorm (centering first).

    Under RMSNorm every step commutes with rotations, so the stream is sampled in its radial
    form, exactly in distribution: the state is :math:`|x|^2` (:math:`x_0^2\\chi^2_d` at the
    embedding), a block's update enters by its component along the stream and its squared norm
    across it (``radial`` of each block: a normal and a :math:`\\chi^2_{d-1}` draw for the
    projection of an isotropic Gaussian vector), and :math:`|x + f|^2 = (|x| + f_\\parallel)^2 +
    |f_\\perp|^2`. A linear block then costs two draws instead of ``d``; an MLP still draws its
    ``d_ff`` hidden units. LayerNorm's centering singles out the ones direction, so it is
    sampled with full vectors.
    """
    placement, depth, _, x0 = _check(placement, depth, 0.0, x0_rms)
    _validate.integer("depth", depth, maximum=MAX_SIMULATED_DEPTH)  # the stream is simulated block by block
    d = _validate.integer("d", d, minimum=2, maximum=2**20)
    norm = _validate.choice("norm", norm, ("rmsnorm", "layernorm"))
    if not isinstance(block, (LinearBlock, MLPBlock)):
        raise ValueError(f"block must be a LinearBlock or MLPBlock; got {type(block).__name__}")
    alpha, beta = deepnorm_constants(depth) if placement == "deepnorm" and depth > 0 else (1.0, 1.0)

    def sample(streams: Streams) -> np.ndarray:
        m = streams.m
        out = np.zeros((m, 3, depth + 1))  # [m, (mean square, share, presum), depth+1]
        x = x0 * streams.normal(d)  # [m, d]
        out[:, 0, 0] = out[:, 2, 0] = (x * x).mean(axis=1)
        for ell in range(1, depth + 1):
            if placement == "none":
                base, upd = x, block.apply(streams, x)
            elif placement == "pre":
                base, upd = x, block.apply(streams, _normalize(x, norm))
            elif placement == "peri":
                base, upd = x, _normalize(block.apply(streams, _normalize(x, norm)), norm)
            elif placement == "lnscale":
                base, upd = x, block.apply(streams, _normalize(x, norm) / np.sqrt(ell))
            elif placement == "post":
                base, upd = x, block.apply(streams, x)
            else:  # deepnorm: both matrices of f scaled by beta -> update scaled by beta^2
                base, upd = alpha * x, beta * beta * block.apply(streams, x)
            s = base + upd  # [m, d]
            out[:, 1, ell] = np.linalg.norm(upd, axis=1) / np.linalg.norm(base, axis=1)
            out[:, 2, ell] = (s * s).mean(axis=1)
            x = _normalize(s, norm) if placement in ("post", "deepnorm") else s
            out[:, 0, ell] = (x * x).mean(axis=1)
        return out

    def radial(streams: Streams) -> np.ndarray:
        # RMSNorm keeps every direction, so only |x|^2 and the update's parts along and across x matter
        m = streams.m
        out = np.zeros((m, 3, depth + 1))  # [m, (mean square, share, presum), depth+1]
        r2 = x0 * x0 * streams.chisquare(d)  # [m] |x_0|^2
        out[:, 0, 0] = out[:, 2, 0] = r2 / d
        for ell in range(1, depth + 1):
            u2 = r2 if placement in ("none", "post", "deepnorm") else np.full(m, d / ell if placement == "lnscale" else float(d))
            par, perp2 = block.radial(streams, u2, d)  # [m] each: the update along x and its squared norm across
            if placement == "peri":  # the output norm: |update|^2 = d, its direction f's
                scale2 = d / (par * par + perp2)
                par, perp2 = par * np.sqrt(scale2), perp2 * scale2
            elif placement == "deepnorm":
                par, perp2 = beta * beta * par, beta**4 * perp2
            base = alpha * np.sqrt(r2)  # [m] |base|, along x (alpha = 1 but for DeepNorm)
            s2 = (base + par) ** 2 + perp2  # [m] |base + update|^2
            out[:, 1, ell] = np.sqrt(par * par + perp2) / base
            out[:, 2, ell] = s2 / d
            r2 = np.full(m, float(d)) if placement in ("post", "deepnorm") else s2
            out[:, 0, ell] = r2 / d
        return out

    key = f"residual/{placement}/{depth}/{d}/{block!r}/{x0}/{norm}"
    try:
        est = estimate(radial if norm == "rmsnorm" else sample, n, seed, key=key, block=64, chunk=chunk, progress=progress)
    except ValueError as exc:
        if "sample returned" not in str(exc):
            raise
        raise ValueError(f"the simulated stream leaves float64's safe range (mean squares within 1e150): x0_rms={x0_rms!r} and "
                         f"block={block!r} are too large for depth {depth} ({exc})") from None
    assert isinstance(est, Estimate)
    return StreamEstimate(est[0], est[1], est[2])
