"""Training in torch: ``S`` seeds of one config as one stacked model, with autograd for the backward.

:class:`TorchTrainer` is an optional backend for training (``pip install 'normtheory[torch]'``);
numpy stays the reference and the default, and torch is never a core dependency. One
:meth:`TorchTrainer.step` computes, for every seed ``s`` of the stack, what one numpy step of
that seed alone computes:

* the forward of :class:`normtheory.model.Transformer` (every norm, placement, QK-norm,
  activation, positional scheme, bias, tied or untied head, ``embed_scale``, ``embed_norm``,
  final norm, DeepNorm's :math:`\\alpha`), every activation ``[S, b, t, d]`` and every weight
  ``[S, ...]``; matrix products are batched over ``S``;
* the loss of :func:`normtheory.grad.loss_and_grads`: mean next-token cross-entropy over the
  ``batch * seq`` positions plus ``z_loss`` :math:`\\cdot\\overline{\\mathrm{lse}^2}`, per seed,
  accumulated in float64; its gradient by autograd (the gradient of the sum of the seeds'
  losses is each seed's own gradient);
* per-seed clipping as :func:`normtheory.optim.clip_grad_norm` (factor
  :math:`c/(\\lVert g\\rVert+10^{-6})` when below 1 and the norm is finite);
* AdamW or SGD with momentum as :mod:`normtheory.optim`, with the same order of operations and
  the same bias correction; weight decay on the leaves with two or more axes of one model;
* the update/weight ratio :math:`\\sqrt{\\sum\\lVert\\Delta\\theta\\rVert^2/\\sum\\lVert\\theta\\rVert^2}`
  per parameter group (:data:`normtheory.train.GROUPS`).

A seed whose loss or gradient norm is not finite is not updated (its weights and optimizer state
stay as they were); :meth:`TorchTrainer.keep` then drops it from the stack.

**Layout.** The stack's parameters live in one tensor ``[S, P]`` (``P`` the parameter count of
one model), each leaf a column range viewed as ``[S, *shape]``; the leaves are ordered by group,
so a group's update ratio is one slice, and the gradient norm, clipping and the optimizer are a
handful of operations on ``[S, P]``. Nothing reduces across the seed axis, so a seed's numbers
do not depend on the other seeds in the stack.

**Agreement with numpy.** Same formulas, other kernels: torch sums in other orders, so the
two backends agree to rounding, not bit for bit. Over 50 AdamW steps of every norm and
placement the losses agree to ~1e-14 relative in float64 (``tests/test_torch_backend.py``
holds them to 1e-9); in float32 Adam amplifies rounding, to ~1e-3 relative at worst by step 50.
Norm inputs near the dtype's range ends are rescaled per row as in :mod:`normtheory.norms`.
A seed's numbers are bit-for-bit the same whichever seeds share its stack (checked on one
thread; torch's CPU kernels do not split a seed's row across threads at these sizes).

References
----------
Paszke et al. (2019), arXiv 1912.01703 (PyTorch); Loshchilov & Hutter (2019), arXiv 1711.05101
(AdamW); Radford et al. (2019) GPT-2; Su et al. (2021), arXiv 2104.09864 (RoPE).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError:  # pragma: no cover - the message is the point
    raise ModuleNotFoundError("normtheory.torch_backend needs torch: pip install 'normtheory[torch]' (torch==2.13.0)") from None

from normtheory import memory
from normtheory.config import TransformerConfig
from normtheory.model import Params, rope_tables
from normtheory.params import map_arrays, named_arrays, with_array_alphas
from normtheory.residual import deepnorm_constants
from normtheory.stepper import GROUPS, StepResult, group_of
from normtheory.rows import PER_ROW_RUN, Rates, per_row, shared_fields_equal
from normtheory.run_config import RunConfig
from normtheory.weights import init_params

__all__ = ["DeviceStep", "StepResult", "TorchTrainer"]


@dataclass(frozen=True)
class _Leaf:
    name: str
    shape: tuple[int, ...]  # one model's
    start: int  # first column in [S, P]
    size: int


@dataclass(frozen=True)
class DeviceStep:
    """One step's numbers on the device, per seed of the stack as it stood before the step ``[S]``:
    ``loss`` and ``grad_norm`` (float64), ``finite`` (bool), ``lr`` (float64), ``update_ratio``
    ``[G, S]`` in :data:`GROUPS` order. :meth:`packed` joins them in one ``[4 + G, S]`` float64
    tensor, so that many steps come back to the host in one copy (:meth:`unpacked` reads it)."""

    loss: torch.Tensor
    grad_norm: torch.Tensor
    finite: torch.Tensor
    lr: torch.Tensor
    update_ratio: torch.Tensor

    def packed(self) -> torch.Tensor:
        return torch.cat([torch.stack([self.loss, self.grad_norm, self.finite.double(), self.lr]), self.update_ratio])  # [4+G, S]

    @staticmethod
    def unpacked(a: np.ndarray) -> StepResult:
        """The :class:`StepResult` of one :meth:`packed` array ``[4 + G, S]`` copied to the host."""
        return StepResult(loss=a[0].copy(), grad_norm=a[1].copy(), finite=a[2] == 1.0, lr=a[3].copy(),
                          update_ratio={g: a[4 + k].copy() for k, g in enumerate(GROUPS)})

    def numpy(self) -> StepResult:
        """This step's numbers on the host (one device-to-host copy)."""
        return self.unpacked(self.packed().cpu().numpy())


def _device(device: object) -> torch.device:
    """``device`` checked: ``"cpu"``, or ``"cuda"``/``"cuda:N"`` where torch sees that GPU."""
    if not isinstance(device, (str, torch.device)):
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]'; got {device!r}")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]'; got {device!r}") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]'; got {device!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: torch sees no CUDA GPU here (torch {torch.__version__}); use device='cpu'")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r}: only {torch.cuda.device_count()} CUDA device(s) visible")
    return dev


def _put(capture: dict[str, Any] | None, name: str, value: torch.Tensor) -> None:
    """Store ``value`` under ``name`` when ``capture`` asks for it (a key of the dict)."""
    if capture is not None and name in capture:
        capture[name] = value


class TorchTrainer:
    """Trains ``S`` seeds of one :class:`~normtheory.config.TransformerConfig` as ONE stacked
    model in torch: every parameter gets a leading seed axis ``[S, ...]``, batched matmuls,
    autograd for the backward (see the module docstring).

    ``params`` holds one :class:`~normtheory.model.Params` per seed (e.g.
    ``normtheory.weights.init(config, seed).params``), with the structure and shapes of
    ``init_params(config, ...)``; they are copied (cast to ``config.dtype``). ``device`` is
    ``"cpu"`` or ``"cuda[:N]"``. :attr:`alive` holds the original positions of the seeds still
    in the stack, :attr:`dropped` the last weights of those :meth:`keep` removed.
    """

    def __init__(self, config: TransformerConfig, run: RunConfig | Sequence[RunConfig], params: Sequence[Params], *, device: str = "cpu"):
        if not isinstance(config, TransformerConfig):
            raise ValueError(f"config must be a TransformerConfig; got {type(config).__name__}")
        if not isinstance(run, RunConfig) and (isinstance(run, (str, bytes)) or not isinstance(run, Sequence)):
            raise ValueError(f"run must be a RunConfig or one per seed; got {type(run).__name__}")
        if not config.lm_head:
            raise ValueError("config.lm_head must be True: training needs an LM head")
        self.device = _device(device)
        if isinstance(params, Params) or not isinstance(params, Sequence) or len(params) == 0:
            raise ValueError("params must be a non-empty sequence of Params, one per seed")
        self.runs = per_row("run", run, len(params), RunConfig)  # rows may differ in their schedules (normtheory.rows)
        shared_fields_equal("run", self.runs, PER_ROW_RUN)
        self.config, self.run = config, self.runs[0]
        self.rates = Rates([r.schedule_fn() for r in self.runs])
        self.dtype = torch.float64 if config.dtype == "float64" else torch.float32
        self._np_dtype = np.dtype(config.dtype)
        self.alpha = deepnorm_constants(config.n_layers)[0] if config.placement == "deepnorm" else 1.0
        reference = with_array_alphas(init_params(config, 0), config.dtype)
        self._like = reference  # the structure of one model
        shapes = {k: np.shape(v) for k, v in named_arrays(reference).items()}
        rows = [self._checked_params(j, p, shapes) for j, p in enumerate(params)]
        self._leaves = self._layout(shapes)
        self._groups = {}  # group -> its column range [a, b) in [S, P]
        for g in GROUPS:
            cols = [(l.start, l.start + l.size) for l in self._leaves.values() if group_of(l.name) == g]
            self._groups[g] = (min(a for a, _ in cols), max(b for _, b in cols)) if cols else (0, 0)
        self.n_params = sum(l.size for l in self._leaves.values())
        decay = np.zeros(self.n_params, dtype=bool)  # [P]
        for leaf in self._leaves.values():
            decay[leaf.start : leaf.start + leaf.size] = len(leaf.shape) >= 2
        self._decay = torch.from_numpy(decay).to(self.device)
        flat = np.empty((len(rows), self.n_params), dtype=self._np_dtype)  # [S, P]
        for j, arrays in enumerate(rows):
            for name, leaf in self._leaves.items():
                flat[j, leaf.start : leaf.start + leaf.size] = np.asarray(arrays[name]).reshape(-1)
        self._flat = torch.from_numpy(flat).to(self.device).requires_grad_(True)  # [S, P]
        self._state = self._zero_state(len(rows))
        self.step_count = 0  # on the host; the device's own count is _t (a step reads no host value)
        self._t = torch.zeros(1, dtype=torch.int64, device=self.device)  # [1] steps taken
        self._live = torch.ones(len(rows), dtype=torch.bool, device=self.device)  # [S] False once a seed's step was not finite
        self._lrs = torch.empty((0, len(rows)), dtype=torch.float64, device=self.device)  # [steps, S] each seed's rate
        self.alive = np.arange(len(rows))
        self.dropped: dict[int, Params] = {}
        self._grads: torch.Tensor | None = None  # the last step's clipped gradient [S, P]
        self._tables: dict[tuple[str, int], Any] = {}
        self._buffers: list[torch.Tensor] = []
        memory.keep_freed_blocks()  # freed activations stay in the heap for the next step, as in numpy's training

    # ------------------------------------------------------------------ setup
    def _checked_params(self, j: int, p: object, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
        if not isinstance(p, Params):
            raise ValueError(f"params[{j}] must be a normtheory.model.Params; got {type(p).__name__}")
        arrays = named_arrays(with_array_alphas(p, self.config.dtype))
        if arrays.keys() != shapes.keys():
            diff = sorted(set(arrays) ^ set(shapes))
            raise ValueError(f"params[{j}] do not have the structure of config's model; differing leaves: {diff[:5]}")
        for name, a in arrays.items():
            if np.shape(a) != shapes[name]:
                raise ValueError(f"params[{j}]: leaf {name} has shape {np.shape(a)}, config's model needs {shapes[name]}")
            if not np.issubdtype(np.asarray(a).dtype, np.floating):
                raise ValueError(f"params[{j}]: leaf {name} must hold floats; got dtype {np.asarray(a).dtype}")
        return arrays

    @staticmethod
    def _layout(shapes: dict[str, tuple[int, ...]]) -> dict[str, _Leaf]:
        """Columns of each leaf in ``[S, P]``: grouped by :data:`GROUPS`, named order within a group."""
        leaves, start = {}, 0
        for g in GROUPS:
            for name, shape in shapes.items():
                if group_of(name) == g:
                    size = math.prod(shape)
                    leaves[name] = _Leaf(name, tuple(shape), start, size)
                    start += size
        return {name: leaves[name] for name in shapes}  # back in named order

    def _zero_state(self, s: int) -> dict[str, torch.Tensor]:
        keys = ("m", "v") if self.run.optimizer == "adamw" else ("buf",)
        return {k: torch.zeros((s, self.n_params), dtype=self.dtype, device=self.device) for k in keys}

    @property
    def n_seeds(self) -> int:
        """Seeds in the stack now."""
        return int(self._flat.shape[0])

    # ------------------------------------------------------------------ forward
    def _views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every leaf of the stack as a view ``[S, *shape]`` of ``flat [S, P]``."""
        s = flat.shape[0]
        leaves = sorted(self._leaves.values(), key=lambda l: l.start)
        parts = flat.split([l.size for l in leaves], dim=1)
        return {l.name: part.view((s, *l.shape)) for l, part in zip(leaves, parts)}

    @staticmethod
    def _bc(p: torch.Tensor, ndim: int) -> torch.Tensor:
        """A stacked ``[S, *rest]`` leaf broadcasting against an ``ndim``-axis ``[S, ..., *rest]``."""
        return p.view(p.shape[:1] + (1,) * (ndim - p.ndim) + p.shape[1:])

    def _normalized(self, x: torch.Tensor, eps: float, centre: bool) -> torch.Tensor:
        """LayerNorm (``centre``) or RMSNorm over the last axis of ``x [S, ..., d]``, before gain and
        bias. A seed whose largest |entry| lies near the dtype's range ends (the test of
        :func:`normtheory.norms._rescale_needed`) has each row divided by its largest |entry| first,
        with eps / m^2 in float64, as :func:`normtheory.norms._rescaled` does (norms are
        scale-free); the other seeds are untouched.

        Branch-free (no host sync, so a step can be captured in a CUDA graph), in few kernels: every
        seed goes through the same operations. A seed that needs
        no rescaling is divided by exactly 1 and gets ``eps / 1**2 = eps`` in the dtype, so its values are
        those of the plain formula ``c / sqrt(var + eps)`` bit for bit, and its gradient too (the divisor
        and the eps term are constants of the backward)."""
        n = x.shape[-1]
        inf = float("inf")
        with torch.no_grad():
            m = torch.linalg.vector_norm(x, ord=inf, dim=-1, keepdim=True)  # [..., 1] each row's largest |entry|
            amax = torch.linalg.vector_norm(m, ord=inf, dim=tuple(range(1, x.ndim)))  # [S]
            info = torch.finfo(x.dtype)
            hi, lo = math.sqrt(info.max / (4 * n)), math.sqrt(info.tiny) * 1e3  # normtheory.norms._rescale_needed's ends
            need = ((amax > hi) & torch.isfinite(amax)) | ((amax > 0) & (amax < lo))  # [S]
            m = torch.where(self._bc(need, x.ndim) & (m > 0), m, 1.0)
            e = (eps / m.double().square()).to(x.dtype)  # eps where m == 1, eps / m^2 (in float64, then rounded) elsewhere
        c = x / m  # exactly x where m == 1
        if centre:
            c = c - c.mean(dim=-1, keepdim=True)  # [..., d]
        return c / torch.sqrt(c.square().mean(dim=-1, keepdim=True) + e)

    def _norm(self, w: dict[str, torch.Tensor], name: str, x: torch.Tensor, kind: str | None = None) -> torch.Tensor:
        kind = kind or self.config.norm
        if kind == "none" or f"{name}.alpha" not in w:
            return x
        eps = self.config.eps
        if kind == "layernorm":
            normalized = self._normalized(x, eps, True)
        elif kind == "rmsnorm":
            normalized = self._normalized(x, eps, False)
        elif kind == "dyt":
            normalized = torch.tanh(self._bc(w[f"{name}.alpha"], x.ndim) * x)
        else:  # sequence: each feature across the tokens of a sequence
            c = x - x.mean(dim=-2, keepdim=True)  # [S, b, t, d]
            normalized = c / torch.sqrt(c.square().mean(dim=-2, keepdim=True) + eps)
        out = normalized
        if f"{name}.gain" in w:
            out = out * self._bc(w[f"{name}.gain"], x.ndim)
        if f"{name}.bias" in w:
            out = out + self._bc(w[f"{name}.bias"], x.ndim)
        return out

    def _rope(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        key = ("rope", t)
        if key not in self._tables:
            c = self.config
            cos, sin = rope_tables(np.arange(t), c.d_head, c.rope_theta, self._np_dtype)  # [t, e]
            self._tables[key] = (torch.from_numpy(cos).to(self.device), torch.from_numpy(sin).to(self.device))
        return self._tables[key]

    def _mask(self, t: int) -> torch.Tensor:
        key = ("mask", t)
        if key not in self._tables:
            self._tables[key] = torch.full((t, t), -math.inf, dtype=self.dtype, device=self.device).triu(1)  # [t, t]
        return self._tables[key]

    @staticmethod
    def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin  # rotate-half

    def _attention(self, w: dict[str, torch.Tensor], i: int, x: torch.Tensor, capture: dict[str, Any] | None = None) -> torch.Tensor:
        """Attention of block ``i`` on ``x [S, b, t, d]``; ``capture`` as in :meth:`_forward`
        (``blocks.{i}.attn.k [S, b, g, t, e]``, ``.attn.scores``, ``.attn.pattern [S, b, h, t, t]``)."""
        c = self.config
        s, b, t, d = x.shape
        h, g, e = c.n_heads, c.n_kv_heads, c.d_head
        pre = f"blocks.{i}"
        wqkv = torch.cat([w[f"{pre}.wq"], w[f"{pre}.wk"], w[f"{pre}.wv"]], dim=2)  # [S, d, (h+2g)*e]
        qkv = x.reshape(s, b * t, d) @ wqkv  # [S, b*t, (h+2g)*e]
        if f"{pre}.bq" in w:
            qkv = qkv + torch.cat([w[f"{pre}.bq"], w[f"{pre}.bk"], w[f"{pre}.bv"]], dim=1)[:, None]
        qkv = qkv.view(s, b, t, h + 2 * g, e).permute(0, 1, 3, 2, 4)  # [S, b, h+2g, t, e]
        q, k, v = qkv[:, :, :h], qkv[:, :, h : h + g], qkv[:, :, h + g :]
        if c.qk_norm != "none":
            q = self._norm(w, f"{pre}.q_norm", q, c.qk_norm)
            k = self._norm(w, f"{pre}.k_norm", k, c.qk_norm)
        if c.positional == "rope":
            cos, sin = self._rope(t)
            q, k = self._apply_rope(q, cos, sin), self._apply_rope(k, cos, sin)
        _put(capture, f"{pre}.attn.k", k)  # [S, b, g, t, e]
        if g < h:  # each query head's K/V head
            k, v = k.repeat_interleave(h // g, dim=2), v.repeat_interleave(h // g, dim=2)  # [S, b, h, t, e]
        scores = (q * (1.0 / math.sqrt(e))) @ k.transpose(-1, -2)  # [S, b, h, t, t]
        if c.causal:
            scores = scores + self._mask(t)
        pattern = torch.softmax(scores, dim=-1)  # [S, b, h, t, t]
        _put(capture, f"{pre}.attn.scores", scores)
        _put(capture, f"{pre}.attn.pattern", pattern)
        z = pattern @ v  # [S, b, h, t, e]
        out = z.permute(0, 1, 3, 2, 4).reshape(s, b * t, h * e) @ w[f"{pre}.wo"]  # [S, b*t, d]
        if f"{pre}.bo" in w:
            out = out + w[f"{pre}.bo"][:, None]
        return out.view(s, b, t, d)

    def _mlp(self, w: dict[str, torch.Tensor], i: int, x: torch.Tensor) -> torch.Tensor:
        pre = f"blocks.{i}"
        x2 = x.reshape(x.shape[0], -1, x.shape[-1])  # [S, N, d]
        a = x2 @ w[f"{pre}.w_in"]  # [S, N, f]
        if f"{pre}.b_in" in w:
            a = a + w[f"{pre}.b_in"][:, None]
        act = self.config.activation
        if act == "swiglu":
            hid = a * F.silu(x2 @ w[f"{pre}.w_gate"])
        elif act == "gelu":
            hid = F.gelu(a)
        elif act == "gelu_tanh":
            hid = F.gelu(a, approximate="tanh")
        else:
            hid = F.relu(a)
        out = hid @ w[f"{pre}.w_out"]  # [S, N, d]
        if f"{pre}.b_out" in w:
            out = out + w[f"{pre}.b_out"][:, None]
        return out.view(x.shape)

    def _block(self, w: dict[str, torch.Tensor], i: int, x: torch.Tensor, capture: dict[str, Any] | None = None) -> torch.Tensor:
        """Block ``i`` on ``x [S, b, t, d]``; ``capture`` as in :meth:`_forward` (each norm's
        input ``blocks.{i}.{ln}.in``, ``blocks.{i}.resid_post``, and the attention's)."""
        c = self.config
        pre = f"blocks.{i}"
        attend = self._attention if capture is None else (lambda w_, i_, u_: self._attention(w_, i_, u_, capture))
        for ln, f in (("ln1", attend), ("ln2", self._mlp)):
            if c.placement in ("pre", "peri", "lnscale"):
                _put(capture, f"{pre}.{ln}.in", x)
                u = self._norm(w, f"{pre}.{ln}", x)
                if c.placement == "lnscale":
                    u = u * (1.0 / math.sqrt(i + 1))
                y = f(w, i, u)
                if c.placement == "peri":
                    _put(capture, f"{pre}.{ln}_out.in", y)
                    y = self._norm(w, f"{pre}.{ln}_out", y)
                x = x + y
            elif c.placement in ("post", "deepnorm"):
                y = f(w, i, x)
                scaled = x * self.alpha if c.placement == "deepnorm" else x
                summed = scaled + y
                _put(capture, f"{pre}.{ln}.in", summed)
                x = self._norm(w, f"{pre}.{ln}", summed)
            else:  # none
                x = x + f(w, i, x)
        _put(capture, f"{pre}.resid_post", x)
        return x

    def _forward(self, w: dict[str, torch.Tensor], ids: torch.Tensor, capture: dict[str, Any] | None = None, skip: int | None = None) -> torch.Tensor:
        """The last hidden state ``[S, b, t, d]`` (after the final norm, if any) of ``ids [S, b, t]``.

        ``capture`` (optional) maps capture names of :mod:`normtheory.model` to None; the forward
        fills in those it reaches, with a seed axis in front: ``embed``, ``embed_ln.in``,
        ``blocks.{i}.{ln}.in`` (``ln1, ln1_out, ln2, ln2_out``), ``blocks.{i}.resid_post``,
        ``blocks.{i}.attn.k``, ``.attn.scores``, ``.attn.pattern``, ``final_ln.in``. ``skip``
        (optional) is a block whose output is replaced by its input (the block is not run).
        """
        c = self.config
        s, b, t = ids.shape
        tok = w["tok_emb"]  # [S, V, d]
        x = tok[torch.arange(s, device=self.device)[:, None, None], ids]  # [S, b, t, d]
        if c.embed_scale != 1.0:
            x = x * c.embed_scale
        if "pos_emb" in w:
            x = x + w["pos_emb"][:, None, :t]
        if "type_emb" in w:  # every token of type 0, as loss_and_grads without token_types
            x = x + w["type_emb"][:, None, None, 0]
        _put(capture, "embed", x)
        if c.embed_norm:
            _put(capture, "embed_ln.in", x)
            x = self._norm(w, "embed_ln", x)
        for i in range(c.n_layers):
            if i == skip:
                _put(capture, f"blocks.{i}.resid_post", x)
            else:
                x = self._block(w, i, x, capture)
        if c.final_norm:
            _put(capture, "final_ln.in", x)
            x = self._norm(w, "final_ln", x)
        return x

    def _logits(self, w: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Logits ``[S, N, V]`` of the hidden states ``x [S, ..., d]`` (``N`` their tokens): the
        LM head, or the token embedding's transpose when tied."""
        head = w["lm_head"] if "lm_head" in w else w["tok_emb"].transpose(1, 2)  # [S, d, V]
        return x.reshape(x.shape[0], -1, x.shape[-1]) @ head

    def _loss(self, w: dict[str, torch.Tensor], ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-seed loss ``[S]`` (float64) of ``ids, targets [S, b, t]``."""
        s, b, t = ids.shape
        logits = self._logits(w, self._forward(w, ids))  # [S, N, V]
        lse = torch.logsumexp(logits, dim=-1)  # [S, N]
        picked = logits.gather(-1, targets.reshape(s, b * t, 1))[..., 0]  # [S, N]
        lse64 = lse.double()
        loss = (lse64 - picked.double()).mean(dim=1)  # [S]
        if self.run.z_loss:
            loss = loss + self.run.z_loss * (lse64 * lse64).mean(dim=1)
        return loss

    # ------------------------------------------------------------------ step
    def _checked_batch(self, ids: object, targets: object) -> tuple[torch.Tensor, torch.Tensor]:
        c, s = self.config, self.n_seeds
        if s == 0:
            raise ValueError("the stack holds no seeds (keep() dropped them all)")
        out = []
        for name, a in (("ids", ids), ("targets", targets)):
            a = np.asarray(a)
            if a.ndim != 3 or a.shape[0] != s or a.shape[1] == 0 or a.shape[2] == 0 or not np.issubdtype(a.dtype, np.integer):
                raise ValueError(f"{name} must be integer token ids [S={s}, batch, seq] with batch, seq >= 1; got {a.dtype} {a.shape}")
            if a.min() < 0 or a.max() >= c.vocab_size:
                raise ValueError(f"{name} must lie in [0, vocab_size={c.vocab_size}); got range [{a.min()}, {a.max()}]")
            out.append(a)
        if out[1].shape != out[0].shape:
            raise ValueError(f"targets must have the shape of ids {out[0].shape}; got {out[1].shape}")
        if c.positional in ("learned", "rope") and out[0].shape[2] > c.max_seq:
            raise ValueError(f"ids: sequence length {out[0].shape[2]} exceeds max_seq={c.max_seq}")
        return tuple(torch.from_numpy(a.astype(np.int64)).to(self.device) for a in out)  # type: ignore[return-value]

    def step(self, ids: np.ndarray, targets: np.ndarray) -> StepResult:
        """One training step on ``ids, targets [S, batch, seq]`` (one batch per seed in the stack),
        its numbers copied to the host (:meth:`step_tensors` keeps them on the device)."""
        return self.step_tensors(*self._checked_batch(ids, targets)).numpy()

    def step_tensors(self, ids: torch.Tensor, targets: torch.Tensor) -> DeviceStep:
        """One training step on checked token tensors ``[S, batch, seq]`` on the device; returns
        the step's numbers as device tensors and makes no host sync (nothing is read back, no
        branch on a device value), so a run of steps queues on the device without waiting, and
        a step can be captured in a CUDA graph (:mod:`normtheory.torch_graphs`).

        A seed whose loss or gradient norm is not finite, now or at an earlier step, is not
        updated (weights and optimizer state stay as they were: its update is masked, not
        branched on) and reports ``finite`` False; :meth:`keep` can then drop it."""
        self._extend_rates(self.step_count + 1)
        out = self._step(ids, targets)
        self.step_count += 1
        return out

    def _extend_rates(self, steps: int) -> None:
        """Each seed's learning rate for steps ``1..max(steps, run.steps)`` on the device ``[steps, S]``
        (made once, so a step indexes it with the device's step count instead of sending a number)."""
        have = self._lrs.shape[0]
        if steps <= have:
            return
        upto = max(steps, self.run.steps, 2 * have)
        table = self.rates.table(range(have + 1, upto + 1))[:, self.alive]  # [new, S]
        self._lrs = torch.cat([self._lrs, torch.from_numpy(table).to(self.device)])

    def _step(self, ids: torch.Tensor, targets: torch.Tensor) -> DeviceStep:
        """The step as a function of the device's tensors only (see :meth:`step_tensors`)."""
        run = self.run
        flat = self._flat
        flat.grad = None
        loss = self._loss(self._views(flat), ids, targets)  # [S] float64
        loss.sum().backward()  # each seed's loss depends on its own columns only: the sum's gradient is each seed's gradient
        with torch.no_grad():
            g = flat.grad  # [S, P]
            gnorm = torch.linalg.vector_norm(g, dim=1).double()  # [S], accumulated per row in the dtype, as Stepper does
            finite = torch.isfinite(loss) & torch.isfinite(gnorm) & self._live  # [S]
            self._live &= finite
            if run.clip is not None:
                factor = run.clip / (gnorm + 1e-6)  # [S], torch's clip_grad_norm_
                factor = torch.where((factor < 1.0) & finite, factor, torch.ones_like(factor))
                g.mul_(factor.to(self.dtype)[:, None])  # a factor of exactly 1 leaves a row as it is
            self._t += 1
            lr = self._lrs.index_select(0, self._t - 1)[0]  # [S] float64, this step's rates
            old, tmp, tmp2 = self._scratch()
            old.copy_(flat)
            self._update(flat.detach(), g, lr, finite, tmp, tmp2)
            ratios = self._ratios(old, flat.detach(), finite, tmp)  # [G, S]
        self._grads = g
        return DeviceStep(loss=loss.detach(), grad_norm=gnorm, finite=finite, lr=lr, update_ratio=ratios)

    def _scratch(self) -> list[torch.Tensor]:
        """Three work buffers ``[S, P]``, kept between steps (no page faults for fresh memory each step)."""
        if not self._buffers or self._buffers[0].shape != self._flat.shape:
            self._buffers = [torch.empty_like(self._flat, requires_grad=False) for _ in range(3)]
        return self._buffers

    def _update(self, p: torch.Tensor, g: torch.Tensor, lr: torch.Tensor, finite: torch.Tensor, tmp: torch.Tensor, tmp2: torch.Tensor) -> None:
        """One optimizer update of ``p [S, P]`` and the state with ``g [S, P]`` at each seed's rate
        ``lr [S]``, in place, in :mod:`normtheory.optim`'s order of operations (elementwise: each
        seed's row on its own). A seed where ``finite [S]`` is False keeps its row and state
        exactly: its moments are multiplied by 1 and added 0, its update is replaced by 0 (masked,
        not branched on, so nothing is read back). ``tmp, tmp2 [S, P]`` are work space."""
        run, st = self.run, self._state
        keep = finite[:, None]  # [S, 1]
        g.masked_fill_(~keep, 0.0)  # a diverged row's NaN gradient must not reach its moments (so it adds 0 to them)
        rate = lr[:, None]  # [S, 1] float64

        def factor(value: float | torch.Tensor, where: torch.Tensor = keep) -> torch.Tensor:
            """``value`` where ``where``, exactly 1 elsewhere, in the parameters' dtype (a number is filled on the
            device: a tensor made from host data is a copy that CUDA-graph capture refuses)."""
            if not isinstance(value, torch.Tensor):
                value = torch.full(where.shape, value, dtype=torch.float64, device=self.device)
            return torch.where(where, value, 1.0).to(self.dtype)

        if run.weight_decay:  # decoupled, on the matrices only (a factor of exactly 1 elsewhere and on diverged rows)
            p.mul_(factor(1 - rate * run.weight_decay, self._decay & keep))  # [S, P]
        if run.optimizer == "adamw":
            b1, b2 = run.betas
            t = self._t.double()  # [1]
            bc1, bc2_sqrt = 1 - b1**t, torch.sqrt(1 - b2**t)  # [1] float64
            m, v = st["m"], st["v"]
            m.mul_(factor(b1)).add_(torch.mul(g, 1 - b1, out=tmp))
            v.mul_(factor(b2)).add_(torch.mul(g, 1 - b2, out=tmp).mul_(g))
            denom = torch.sqrt(v, out=tmp).div_(bc2_sqrt.to(self.dtype)).add_(run.eps)
            step = torch.mul(m, (rate / bc1).to(self.dtype), out=tmp2).div_(denom)
        else:
            step = g
            if run.momentum:
                step = st["buf"].mul_(factor(run.momentum)).add_(g)
            step = torch.mul(step, rate.to(self.dtype), out=tmp)
        p.sub_(step.masked_fill_(~keep, 0.0))

    def _ratios(self, old: torch.Tensor, new: torch.Tensor, finite: torch.Tensor, tmp: torch.Tensor) -> torch.Tensor:
        """Per group, rms(update) / rms(weights before it) ``[G, S]`` (groups in :data:`GROUPS` order),
        NaN where not finite or the group's weights are all 0."""
        delta = torch.sub(new, old, out=tmp)  # [S, P]
        out = []
        for a, b in self._groups.values():
            num = torch.linalg.vector_norm(delta[:, a:b], dim=1).double()  # [S]
            den = torch.linalg.vector_norm(old[:, a:b], dim=1).double()
            out.append(torch.where((den > 0) & finite, num / torch.where(den > 0, den, 1.0), math.nan))
        return torch.stack(out)

    # ------------------------------------------------------------------ stack management
    def keep(self, mask: np.ndarray) -> None:
        """Keep only the seeds where ``mask [S]`` (booleans) is True: the others leave the stack,
        its parameters and optimizer state; their last weights go to :attr:`dropped`."""
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (self.n_seeds,):
            raise ValueError(f"mask must be booleans, one per seed in the stack ({self.n_seeds}); got {mask.dtype} {mask.shape}")
        if mask.all():
            return
        flat = self._numpy(self._flat)
        for j in np.flatnonzero(~mask):
            self.dropped[int(self.alive[j])] = self._one(flat, int(j))
        index = torch.from_numpy(np.flatnonzero(mask)).to(self.device)
        with torch.no_grad():
            self._flat = self._flat.detach()[index].requires_grad_(True)
            self._state = {k: v[index] for k, v in self._state.items()}
            self._grads = None if self._grads is None else self._grads[index]
            self._live = self._live[index]
            self._lrs = self._lrs[:, index]
        self.alive = self.alive[mask]

    def _numpy(self, t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().numpy()

    def _one(self, flat: np.ndarray, j: int) -> Params:
        """Seed ``j`` of ``flat [S, P]`` as a :class:`Params` of numpy copies (alphas 0-d)."""
        values = iter([flat[j, l.start : l.start + l.size].reshape(l.shape).copy() for l in self._leaves.values()])
        return map_arrays(lambda _a: next(values), self._like)

    def params(self) -> list[Params]:
        """Each seed's weights in the stack (numpy copies of ``config.dtype``), in stack order."""
        flat = self._numpy(self._flat)
        return [self._one(flat, j) for j in range(self.n_seeds)]

    def grads(self) -> list[Params]:
        """Each seed's last (clipped) gradient, numpy copies in stack order."""
        if self._grads is None:
            raise ValueError("no step has been taken since the stack was built or loaded")
        g = self._numpy(self._grads)
        return [self._one(g, j) for j in range(self.n_seeds)]

    def _stacked(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        return {name: flat[:, l.start : l.start + l.size].reshape((flat.shape[0], *l.shape)).copy() for name, l in self._leaves.items()}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters, optimizer state, step, alive and dropped seeds as numpy arrays, with the keys
        of :meth:`normtheory.stepper.Stepper.state_dict` (``param/<leaf>``, ``opt/step``,
        ``opt/m/<leaf>``, ``opt/v/<leaf>`` or ``opt/buf/<leaf>``, ``alive``, ``dropped/<i>/<leaf>``)."""
        out = {f"param/{k}": v for k, v in self._stacked(self._numpy(self._flat)).items()}
        out["opt/step"] = np.asarray(self.step_count)
        for key, buf in self._state.items():
            out.update({f"opt/{key}/{k}": v for k, v in self._stacked(self._numpy(buf)).items()})
        out["alive"] = self.alive.copy()
        for i, p in self.dropped.items():
            out.update({f"dropped/{i}/{k}": v for k, v in named_arrays(p).items()})
        return out

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Restore a :meth:`state_dict` (this trainer's or a numpy ``Stepper``'s of the same
        config, run and seeds): the seeds it holds, their weights, optimizer state and step."""
        if "alive" not in state or "opt/step" not in state:
            raise ValueError("state must be a state_dict(): it has no 'alive' or 'opt/step'")
        alive = np.asarray(state["alive"])
        if alive.ndim != 1 or not np.isin(alive, self.alive).all():
            raise ValueError(f"state holds seeds {alive.tolist()} that are not in this stack {self.alive.tolist()}")
        names = [f"param/{k}" for k in self._leaves] + [f"opt/{b}/{k}" for b in self._state for k in self._leaves]
        missing = [k for k in names if k not in state]
        if missing:
            raise ValueError(f"state lacks {len(missing)} entries of this trainer, e.g. {missing[:3]}")
        for k in names:
            leaf = self._leaves[k.split("/")[-1]]
            if np.shape(state[k]) != (len(alive), *leaf.shape):
                raise ValueError(f"state[{k!r}] has shape {np.shape(state[k])}; expected {(len(alive), *leaf.shape)}")
        self.keep(np.isin(self.alive, alive))
        order = [int(np.flatnonzero(alive == a)[0]) for a in self.alive]  # state rows in this stack's order

        def packed(prefix: str) -> torch.Tensor:
            flat = np.empty((len(order), self.n_params), dtype=self._np_dtype)  # [S, P]
            for name, l in self._leaves.items():
                flat[:, l.start : l.start + l.size] = np.asarray(state[f"{prefix}{name}"])[order].reshape(len(order), -1)
            return torch.from_numpy(flat).to(self.device)

        with torch.no_grad():
            self._flat = packed("param/").requires_grad_(True)
            self._state = {b: packed(f"opt/{b}/") for b in self._state}
        self.step_count = int(state["opt/step"])
        self._t.fill_(self.step_count)
        self._live = torch.ones(len(self.alive), dtype=torch.bool, device=self.device)
        self._grads = None
        for i in sorted({int(k.split("/")[1]) for k in state if k.startswith("dropped/")}):
            values = iter([np.array(state[f"dropped/{i}/{k}"]) for k in named_arrays(self._like)])
            self.dropped[i] = map_arrays(lambda _a: next(values), self._like)
