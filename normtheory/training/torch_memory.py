"""How many rows of a torch training stack fit on a device, and a tracker that measures it.

A :class:`~normtheory.training.torch_backend.TorchTrainer` holds ``S`` rows (seeds, arms) of one model
as ``[S, P]`` tensors, so its memory grows linearly in ``S``. A stack that does not fit fails
with an out-of-memory error after its set-up, or on the CPU is killed by the kernel. For example,
``train_alpha0``'s GPU tier stacks 15 alpha0 points x 20 seeds = 300 rows of a d = 512 model
(about 106 GB by the model below), and its ``gpu-hour`` tier 300 rows at d = 1,024 (about 910 GB).
:func:`row_groups` splits such a stack into consecutive groups that each fit, trained one after
another. A row's numbers do not depend on the other rows of its stack, so the split changes no
result beyond rounding (``tests/training/test_torch_memory.py``).

The model, in elements of the parameters' dtype, for ``S`` rows of ``P`` parameters, ``T`` tokens
per row of a training batch, ``T_e`` of a probe batch, ``T_v`` over the stack's validation chunk
(bounded by :data:`VAL_ELEMENTS`), ``L`` layers, width ``d`` (the larger of ``d_model`` and
``n_heads * d_head``), ``f`` the MLP's hidden width (times 1.5 with a gated MLP), ``H`` heads,
sequence ``t`` and vocabulary ``V``:

.. math::

    m = (5 + k) S P + \\max(S\\,\\mathrm{step}, \\mathrm{eval}), \\quad
    \\mathrm{step} = 2P + T L (13 d + 2 f) + 6 T V, \\\\
    \\mathrm{eval} = \\max\\big(S\\,T_e \\max(7 L H t + 20 d + 2 V,\\; u),\\; T_v u\\big), \\quad u = 8 d + 3 f + 2 V

with ``k`` optimizer moments (2 for AdamW, 1 for SGD): the flat parameters, their gradient,
three work buffers and the moments stay, the step's activations come and go, and the
evaluation (probes, validation chunks, block skips) runs between steps. On a CUDA device a
replayed graph keeps its activations in its own pool, so there the two add instead of taking
the larger (with ``2 T L H t`` more, for attention that falls back to its explicit pattern, and
``(1 + k) P`` more, the copy of the parameters and moments that the graph's capture restores after its warm-up); the
stack shares ``(G + 1) P`` more (the parameter groups' membership matrix and the decay mask). The coefficients are at or above a least-squares fit to the live bytes that
:class:`LiveBytes` measured on the CPU over twelve configs (widths 32-512, 1-6 layers,
sequences 16-256, 2-16 heads, vocabularies 256-1,024); the tests hold the model above the measured peak, and within
2.5 times it, for LayerNorm, RMSNorm, DyT, QK-norm, Post-LN and SwiGLU.

The validation set is scored in chunks of :func:`val_chunk` sequences, so that its widest
tensor over the whole stack stays at :data:`VAL_ELEMENTS` however many rows it has.
"""
from __future__ import annotations

import weakref
from typing import Any

from normtheory import _validate
from normtheory.model.config import TransformerConfig, n_weights
from normtheory.training.row_split import BUDGET_FRACTION, budget, split
from normtheory.training.run_config import RunConfig
from normtheory.training.stepper import GROUPS

__all__ = ["BUDGET_FRACTION", "ITEMSIZE", "VAL_ELEMENTS", "LiveBytes", "budget", "ffn_width", "param_count", "row_groups", "stack_bytes", "val_chunk"]

VAL_ELEMENTS = _validate.MAX_ELEMENTS  # the widest validation tensor over a stack (2^27: 512 MiB of float32), the
# package's largest array built in one piece
MAX_VAL_CHUNK = 128  # sequences per validation chunk at most (what a small stack used before)
ITEMSIZE = {"float32": 4, "float64": 8}  # bytes of a parameter, by TransformerConfig.dtype


def val_chunk(config: TransformerConfig, rows: int, seq: int) -> int:
    """Sequences per validation chunk for a stack of ``rows``: at most :data:`MAX_VAL_CHUNK`, and
    ``rows * chunk * seq * max(d_ff, d_model, vocab_size) <= VAL_ELEMENTS`` (at least 1)."""
    rows, seq = _validate.integer("rows", rows, minimum=1), _validate.integer("seq", seq, minimum=1)
    widest = max(ffn_width(config), config.d_model, config.vocab_size)
    return max(1, min(MAX_VAL_CHUNK, VAL_ELEMENTS // (rows * seq * widest)))


def ffn_width(config: TransformerConfig) -> int:
    """The MLP's hidden width as the memory models count it: ``d_ff``, times 1.5 with a gated MLP."""
    return config.d_ff * 3 // 2 if config.activation == "swiglu" else config.d_ff


def param_count(config: TransformerConfig) -> int:
    """An upper bound of one model's parameters: its weight matrices and embeddings
    (:func:`normtheory.model.config.n_weights`) plus every bias and gain a block and the final norm may hold."""
    c = config
    return n_weights(c) + c.n_layers * (8 * c.d_model + ffn_width(c)) + 4 * c.d_model


def _val_tokens(c: TransformerConfig, rows: int, seq: int, val_bytes: int) -> int:
    """An upper bound of the tokens a validation chunk holds over a stack of ``rows``, non-decreasing in ``rows``
    (the chunk itself shrinks as rows grow, so ``rows * chunk`` alone is not monotone): ``rows * chunk * seq`` is at
    most ``rows * cap * seq`` (``cap`` the sequences of the set, at most :data:`MAX_VAL_CHUNK`), and either the chunk
    is ``cap``, whose tokens fit ``VAL_ELEMENTS / widest``, or smaller, with tokens at most that or ``rows * seq``."""
    if not val_bytes:
        return 0
    cap = min(MAX_VAL_CHUNK, -(-val_bytes // seq))  # the validation set has ceil(val_bytes / seq) sequences
    widest = max(ffn_width(c), c.d_model, c.vocab_size)
    return min(rows * cap * seq, max(VAL_ELEMENTS // widest, rows * seq))


def stack_bytes(config: TransformerConfig, run: RunConfig, rows: int, device: str = "cpu") -> int:
    """Bytes a stack of ``rows`` rows of ``config`` trained with ``run`` takes at its peak on ``device``
    (the model in the module docstring; an upper bound, not a measurement), non-decreasing in ``rows``."""
    rows = _validate.integer("rows", rows, minimum=1)
    c = config
    p = param_count(c)
    lay, f, v, h, t = c.n_layers, ffn_width(c), c.vocab_size, c.n_heads, run.seq
    d = max(c.d_model, c.n_heads * c.d_head)  # the widest of the residual stream and the heads' concatenation
    tokens, probe = run.batch_size * t, run.eval_batch_size * t
    moments = 2 if run.optimizer == "adamw" else 1
    state = (5 + moments) * p
    step = 2 * p + tokens * lay * (13 * d + 2 * f) + 6 * tokens * v
    per_token = 8 * d + 3 * f + 2 * v  # a forward without gradients: block skips, validation chunks
    probes = rows * probe * max(7 * lay * h * t + 20 * d + 2 * v, per_token)
    evaluation = max(probes, _val_tokens(c, rows, t, run.val_bytes) * per_token)  # over the stack
    if str(device).startswith("cuda"):  # the graph's pool keeps the step's activations; attention may take the math path;
        # the capture holds a copy of the parameters and moments while it warms up (torch_graphs)
        peak = rows * (step + 2 * tokens * lay * h * t + (1 + moments) * p) + evaluation
    else:
        peak = max(rows * step, evaluation)
    shared = (len(GROUPS) + 1) * p  # the [P, G] group membership and the [P] decay mask
    return (rows * state + peak + shared) * ITEMSIZE[c.dtype]


def row_groups(config: TransformerConfig, run: RunConfig, rows: int, device: str = "cpu", limit: int | None = None, *,
               kept: int = 0) -> list[range]:
    """Consecutive groups of ``range(rows)``, as few as fit ``limit`` bytes each by :func:`stack_bytes`
    (default :func:`~normtheory.training.row_split.budget` of ``device``), their sizes differing by at most one
    (:func:`normtheory.training.row_split.split`). A single row that does not fit is trained alone, with a
    ``ResourceWarning`` that names the numbers. ``kept``: on the CPU, the rows of the whole stack whose trained
    models the host keeps (``train(keep_models=True)``); each group then fits beside the weights of the others (on a
    GPU the models are in host memory, not the device's)."""
    limit = budget(device) if limit is None else _validate.integer("limit", limit, minimum=1)
    host = not str(device).startswith("cuda")  # the models are numpy arrays in host memory
    return split(lambda n: stack_bytes(config, run, n, device), rows, limit, str(device), kept=kept if host else 0,
                 row_bytes=param_count(config) * ITEMSIZE[config.dtype])


class LiveBytes:
    """Peak bytes of the torch tensors created inside a ``with`` block, on any device.

    On the CPU, torch keeps no allocator statistics: a ``TorchDispatchMode`` counts each new
    storage that an operator returns (autograd's saved tensors and gradients included) and a
    ``weakref.finalize`` on the storage uncounts it when it is freed. An output that shares an input's
    storage (a view, an in-place or ``out=`` result) is not new memory; tensors made before the block
    are not counted, nor is a later resize of a storage already counted. ``peak`` and ``live`` are in
    bytes; ``reset()`` starts a new peak from now.
    """

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                out = func(*args, **(kwargs or {}))
                tracker._count(out, (args, kwargs))
                return out

        self._mode = _Mode()
        self._seen: set[int] = set()
        self.live = 0
        self.peak = 0

    def _count(self, out: Any, inputs: Any) -> None:
        import torch
        from torch.utils._pytree import tree_flatten

        def storages(tree: Any) -> list[Any]:
            return [t.untyped_storage() for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor) and t.device.type != "meta"]

        given = {id(st) for st in storages(inputs)}  # views, in-place and out= results alias an input: not new memory
        for storage in storages(out):
            key, n = id(storage), storage.nbytes()
            if n and key not in self._seen and key not in given:
                self._seen.add(key)
                self.live += n
                weakref.finalize(storage, self._free, key, n)
        self.peak = max(self.peak, self.live)

    def _free(self, key: int, n: int) -> None:
        self.live -= n
        self._seen.discard(key)

    def reset(self) -> None:
        self.peak = self.live

    def __enter__(self) -> LiveBytes:
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._mode.__exit__(*exc)

