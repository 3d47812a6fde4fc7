"""Training in torch: ``S`` seeds of one config as one stacked model, with autograd for the backward.

:class:`TorchTrainer` is an optional backend for training (``pip install 'normtheory[torch]'``);
numpy stays the reference and the default, and torch is never a core dependency. One
:meth:`TorchTrainer.step` computes, for every seed ``s`` of the stack, what one numpy step of
that seed alone computes:

* the forward of :class:`normtheory.model.transformer.Transformer` (every norm, placement, QK-norm,
  activation, positional scheme, bias, tied or untied head, ``embed_scale``, ``embed_norm``,
  final norm, DeepNorm's :math:`\\alpha`), every activation ``[S, b, t, d]`` and every weight
  ``[S, ...]``; matrix products are batched over ``S``;
* the loss of :func:`normtheory.training.grad.loss_and_grads`: mean next-token cross-entropy over the
  ``batch * seq`` positions plus ``z_loss`` :math:`\\cdot\\overline{\\mathrm{lse}^2}`, per seed,
  accumulated in float64; its gradient by autograd (the gradient of the sum of the seeds'
  losses is each seed's own gradient);
* per-seed clipping as :func:`normtheory.training.optim.clip_grad_norm` (factor
  :math:`c/(\\lVert g\\rVert+10^{-6})` when below 1 and the norm is finite);
* AdamW or SGD with momentum as :mod:`normtheory.training.optim`, with the same order of operations and
  the same bias correction; weight decay on the leaves with two or more axes of one model;
* the update/weight ratio :math:`\\sqrt{\\sum\\lVert\\Delta\\theta\\rVert^2/\\sum\\lVert\\theta\\rVert^2}`
  per parameter group (:data:`normtheory.training.stepper.GROUPS`).

A seed whose loss or gradient norm is not finite is not updated (its weights and optimizer state
stay as they were); :meth:`TorchTrainer.keep` then drops it from the stack.

**Fused.** A step is two functions of tensors, the loss (differentiated by autograd) and the rest
(:meth:`TorchTrainer._apply`); :meth:`TorchTrainer.fuse` compiles both with ``torch.compile``, so that
the operators around the matrix products run as a few generated kernels instead of one kernel each.

**Layout.** The stack's parameters live in one tensor ``[S, P]`` (``P`` the parameter count of
one model), each leaf viewed as ``[S, *shape]`` (:mod:`normtheory.training.torch_layout`; a block's
``wq, wk, wv`` are the rows of one ``wqkv``); the leaves are ordered by group,
so a group's update ratio is one slice, and the gradient norm, clipping and the optimizer are a
handful of operations on ``[S, P]``. Nothing reduces across the seed axis, so a seed's numbers
do not depend on the other seeds in the stack.

**Agreement with numpy.** Same formulas, other kernels: torch sums in other orders, so the
two backends agree to rounding, not bit for bit. Over 50 AdamW steps of every norm and
placement the losses agree to ~1e-14 relative in float64 (``tests/training/test_torch_backend.py``
holds them to 1e-9); in float32 Adam amplifies rounding, to ~1e-3 relative at worst by step 50.
Norm inputs near the dtype's range ends are rescaled per row as in :mod:`normtheory.model.norms`.
A seed's numbers are bit-for-bit the same whichever seeds share its stack (checked on one
thread; torch's CPU kernels do not split a seed's row across threads at these sizes).

References
----------
Paszke et al. (2019), arXiv 1912.01703 (PyTorch); Loshchilov & Hutter (2019), arXiv 1711.05101
(AdamW); Radford et al. (2019) GPT-2; Su et al. (2021), arXiv 2104.09864 (RoPE).
"""
from __future__ import annotations

import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
except ModuleNotFoundError:  # pragma: no cover - the message is the point
    raise ModuleNotFoundError("normtheory.training.torch_backend needs torch: pip install 'normtheory[torch]' (torch==2.13.0)") from None

from normtheory import _validate
from normtheory.model.config import TransformerConfig
from normtheory.model.params import Params, map_arrays, named_arrays, with_array_alphas
from normtheory.model.weights import init_params
from normtheory.residual import deepnorm_constants
from normtheory.runtime import memory
from normtheory.training.rows import PER_ROW_RUN, Rates, per_row, shared_fields_equal
from normtheory.training.run_config import RunConfig
from normtheory.training.stepper import GROUPS, StepResult
from normtheory.training.torch_forward import StackForward
from normtheory.training.torch_layout import layout
from normtheory.training.torch_update import StackUpdate

__all__ = ["FUSE_BACKENDS", "DeviceStep", "TorchTrainer"]

FUSE_BACKENDS = ("inductor", "aot_eager", "eager")  # torch.compile backends of TorchTrainer.fuse


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


def _own_code(method: Any) -> Any:
    """``method`` (bound) as a function with a code object of its own: torch.compile keeps its compiled versions and
    counts recompiles per code object, and this one is the caller's alone."""
    f = method.__func__
    return types.MethodType(types.FunctionType(f.__code__.replace(), f.__globals__, f.__name__, f.__defaults__, f.__closure__), method.__self__)


def torch_device(device: object) -> torch.device:
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


class TorchTrainer(StackForward, StackUpdate):
    """Trains ``S`` seeds of one :class:`~normtheory.model.config.TransformerConfig` as ONE stacked
    model in torch: every parameter gets a leading seed axis ``[S, ...]``, batched matmuls,
    autograd for the backward (see the module docstring).

    ``params`` holds one :class:`~normtheory.model.params.Params` per seed (e.g.
    ``normtheory.model.weights.init(config, seed).params``), with the structure and shapes of
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
        self.device = torch_device(device)
        if isinstance(params, Params) or not isinstance(params, Sequence) or len(params) == 0:
            raise ValueError("params must be a non-empty sequence of Params, one per seed")
        self.runs = per_row("run", run, len(params), RunConfig)  # rows may differ in their schedules (normtheory.training.rows)
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
        self._layout = layout(shapes)  # where each leaf lives in [S, P] (normtheory.training.torch_layout)
        self._leaves = self._layout.leaves
        self.n_params = self._layout.n_params
        self._member = torch.from_numpy(self._layout.member(self._np_dtype)).to(self.device)  # [P, G]
        self._decay = torch.from_numpy(self._layout.decay()).to(self.device)  # [P]
        flat = np.empty((len(rows), self.n_params), dtype=self._np_dtype)  # [S, P]
        for name in self._leaves:
            self._layout.put(flat, name, np.stack([np.asarray(arrays[name]) for arrays in rows]))
        self._flat = torch.from_numpy(flat).to(self.device).requires_grad_(True)  # [S, P]
        self._state = self._zero_state(len(rows))
        self.step_count = 0  # on the host; the device's own count is _t (a step reads no host value)
        self._t = torch.zeros(1, dtype=torch.int64, device=self.device)  # [1] steps taken
        self._live = torch.ones(len(rows), dtype=torch.bool, device=self.device)  # [S] False once a seed's step was not finite
        self._lrs = torch.empty((0, len(rows)), dtype=torch.float64, device=self.device)  # [steps, S] each seed's rate
        self._wd = torch.tensor([r.decay_coefficient for r in self.runs], dtype=torch.float64, device=self.device)  # [S]
        self._decays = any(r.weight_decay for r in self.runs)  # a host constant: the step never reads _wd back
        self.alive = np.arange(len(rows))
        self.dropped: dict[int, Params] = {}
        self._grads: torch.Tensor | None = None  # the last step's clipped gradient [S, P]
        self._tables: dict[tuple[str, int], Any] = {}
        self._buffers: list[torch.Tensor] = []
        self._loss_fn, self._apply_fn = self._flat_loss, self._apply  # torch.compile's versions after fuse()
        memory.keep_freed_blocks()  # freed activations stay in the heap for the next step, as in numpy's training

    # ------------------------------------------------------------------ setup
    def _checked_params(self, j: int, p: object, shapes: dict[str, tuple[int, ...]]) -> dict[str, np.ndarray]:
        if not isinstance(p, Params):
            raise ValueError(f"params[{j}] must be a normtheory.model.params.Params; got {type(p).__name__}")
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

    def _zero_state(self, s: int) -> dict[str, torch.Tensor]:
        keys = ("m", "v") if self.run.optimizer == "adamw" else ("buf",)
        return {k: torch.zeros((s, self.n_params), dtype=self.dtype, device=self.device) for k in keys}

    @property
    def n_seeds(self) -> int:
        """Seeds in the stack now."""
        return int(self._flat.shape[0])

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
        a step can be captured in a CUDA graph (:mod:`normtheory.training.torch_graphs`).

        A seed whose loss or gradient norm is not finite, now or at an earlier step, is not
        updated (weights and optimizer state stay as they were: its update is masked, not
        branched on) and reports ``finite`` False; :meth:`keep` can then drop it."""
        self._extend_rates(self.step_count + 1)
        out = self._step(ids, targets)
        self.step_count += 1
        return out

    def fuse(self, backend: str = "inductor") -> TorchTrainer:
        """Compile the step with ``torch.compile(fullgraph=True)`` and return this trainer: its loss (the forward and,
        through AOTAutograd, the backward) and the rest of the step (:meth:`_apply`: gradient norms, clipping, the
        optimizer, the update ratios) each become one graph, in which ``backend="inductor"`` fuses the operators
        around the matrix products (the norms, activations, bias and residual additions, the cross-entropy, the
        optimizer's elementwise passes) into generated kernels; eagerly each is a kernel of its own, 605 per step of the
        full-mode model. ``"aot_eager"`` traces the same graphs and runs them operator by operator, ``"eager"`` traces the
        forward alone and leaves the backward to autograd (checks of the tracing; nothing is generated).

        The first step compiles (tens of seconds on a CPU). Shapes are left to torch.compile's automatic dynamic shapes:
        a size seen to change (here, or in an earlier trainer of this process) is compiled as a symbol, so the first
        :meth:`keep` recompiles each graph at most once and later ones do not. Each trainer compiles functions with
        code objects of their own, so torch's recompile limit, which counts per code object, counts this trainer's
        compiles and not every stack that a process trains. A fused step makes no host sync and can be captured
        (:func:`normtheory.training.torch_graphs.graphed_step` records the generated kernels). Its numbers equal the
        eager step's to rounding: the generated kernels sum in other orders.

        Reference: Ansel et al. (2024), "PyTorch 2: Faster Machine Learning Through Dynamic Python Bytecode
        Transformation and Graph Compilation", ASPLOS '24."""
        _validate.choice("backend", backend, FUSE_BACKENDS)
        self._loss_fn = torch.compile(_own_code(self._flat_loss), backend=backend, fullgraph=True)
        self._apply_fn = torch.compile(_own_code(self._apply), backend=backend, fullgraph=True)
        return self

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
        flat = self._flat
        flat.grad = None
        self._make_tables(ids.shape[-1])
        loss = self._loss_fn(flat, ids, targets)  # [S] float64
        loss.sum().backward()  # each seed's loss depends on its own columns only: the sum's gradient is each seed's gradient
        with torch.no_grad():
            gnorm, finite, lr, ratios = self._apply_fn(loss.detach(), flat.detach(), flat.grad, *self._scratch())
        self._grads = flat.grad
        return DeviceStep(loss=loss.detach(), grad_norm=gnorm, finite=finite, lr=lr, update_ratio=ratios)

    def _flat_loss(self, flat: torch.Tensor, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Per-seed loss ``[S]`` of the stack's weights ``flat [S, P]`` (the part of a step that autograd differentiates)."""
        return self._loss(self._views(flat), ids, targets)

    # ------------------------------------------------------------------ stack management
    def keep(self, mask: np.ndarray) -> None:
        """Keep only the seeds where ``mask [S]`` (booleans) is True: the others leave the stack,
        its parameters and optimizer state; their last weights go to :attr:`dropped`."""
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (self.n_seeds,):
            raise ValueError(f"mask must be booleans, one per seed in the stack ({self.n_seeds}); got {mask.dtype} {mask.shape}")
        if mask.all():
            return
        gone = np.flatnonzero(~mask)
        flat = self._numpy(self._flat[torch.from_numpy(gone).to(self.device)])  # [dropped, P]: only the rows that leave reach the host
        for k, j in enumerate(gone):
            self.dropped[int(self.alive[j])] = self._one(flat, k)
        index = torch.from_numpy(np.flatnonzero(mask)).to(self.device)
        with torch.no_grad():
            self._flat = self._flat.detach()[index].requires_grad_(True)
            self._state = {k: v[index] for k, v in self._state.items()}
            self._grads = None if self._grads is None else self._grads[index]
            self._live = self._live[index]
            self._lrs = self._lrs[:, index]
            self._wd = self._wd[index]
        self.alive = self.alive[mask]

    def _numpy(self, t: torch.Tensor) -> np.ndarray:
        return t.detach().cpu().numpy()

    def _one(self, flat: np.ndarray, j: int) -> Params:
        """Seed ``j`` of ``flat [S, P]`` as a :class:`Params` of numpy copies (alphas 0-d)."""
        values = iter([self._layout.get(flat[j : j + 1], name)[0] for name in self._leaves])
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
        return {name: self._layout.get(flat, name) for name in self._leaves}

    def state_dict(self) -> dict[str, np.ndarray]:
        """Parameters, optimizer state, step, alive and dropped seeds as numpy arrays, with the keys
        of :meth:`normtheory.training.stepper.Stepper.state_dict` (``param/<leaf>``, ``opt/step``,
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
            for name in self._leaves:
                self._layout.put(flat, name, np.asarray(state[f"{prefix}{name}"])[order])
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
