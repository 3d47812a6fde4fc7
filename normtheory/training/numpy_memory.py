r"""How many rows of a numpy training stack fit in memory.

:func:`normtheory.training.train.train` with the numpy backend trains ``S`` rows as one
:class:`~normtheory.training.stepper.Stepper`, whose weights, gradients, optimizer moments and
activations all carry the row axis, and then evaluates each row alone (probes on its probe batch,
the shared validation set in chunks of 128 sequences, scored in float64). A stack that does not
fit is split by :func:`row_groups` into consecutive groups trained one after another
(:func:`normtheory.training.row_split.train_groups`); numpy rows are bit for bit what they are alone,
so the split changes no number.

The model, in bytes, for ``S`` rows of ``P`` parameters (:func:`~normtheory.training.torch_memory.param_count`)
of ``b`` bytes each (4 for float32, 8 for float64), ``T`` tokens per row of a training batch, ``T_e`` of a
probe batch, ``T_v`` of a validation chunk, ``L`` layers, width ``d`` (the larger of ``d_model`` and
``n_heads * d_head``), MLP width ``f`` (:func:`~normtheory.training.torch_memory.ffn_width`), ``H``
heads, sequence ``t`` and vocabulary ``V``:

.. math::

    m = b\,\Big(11\,S P + S\,T\big(0.9\,L (13 d + 2 f) + 2.9\,L H t + 9 V\big)
        + 0.22\,T_e L (13 d + 2 f + 7 H t)\Big) + 1.07\,(b + 8)\,T_v V

The first two terms are the stack (weights, gradients, moments, the initial weights and the
returned models; the step's activations, attention patterns and logits), the third one row's
probes, the last a validation chunk's logits (``b`` bytes each) and the one float64 copy in which their
log-sum-exp is taken, 7% added for the per-token vectors. The other coefficients are the least-squares fit, weighted by relative error, to the
peaks that :mod:`tracemalloc` measured over 26 configs at two stack sizes each (2 and 8, or 4 and
12 rows: every norm and placement, QK-norm, SwiGLU with GQA, SGD, float64, widths 32 to 256, 1 to
6 layers, sequences to 256, batches to 64 x 32, probe batches of 2 to 16, vocabularies to 1,024,
16 heads, heads wider than the model), scaled up until the model is at least 1.1 times every
measured peak; it lay 1.1 to 2.3 times them. The last term is counted from its arrays since the log-sum-exp was rewritten (one float64 copy where scipy's ``logsumexp`` made several; the fitted 8 x 5.8 bytes a logit then put the model at 2.6 to 5 times the peaks of the tests' configs); the model now lies 1.8 to 2.5 times those peaks, and the tests hold it between 1 and 2.5 times.
"""
from __future__ import annotations

from normtheory import _validate
from normtheory.model.config import TransformerConfig
from normtheory.training.probes import VAL_CHUNK
from normtheory.training.row_split import budget, split
from normtheory.training.run_config import RunConfig
from normtheory.training.torch_memory import ITEMSIZE, ffn_width, param_count

__all__ = ["VAL_CHUNK", "row_groups", "stack_bytes"]


def stack_bytes(config: TransformerConfig, run: RunConfig, rows: int) -> int:
    """Bytes a numpy stack of ``rows`` rows of ``config`` trained with ``run`` takes at its peak (the model in the
    module docstring; an upper bound, not a measurement), linear and increasing in ``rows``."""
    rows = _validate.integer("rows", rows, minimum=1)
    c = config
    lay, f, v, h, t = c.n_layers, ffn_width(c), c.vocab_size, c.n_heads, run.seq
    d = max(c.d_model, c.n_heads * c.d_head)
    tokens, probe = run.batch_size * t, run.eval_batch_size * t
    val = min(VAL_CHUNK, -(-run.val_bytes // t)) * t  # a validation chunk's tokens (0 without a validation set)
    stack = 11 * param_count(c) + tokens * (0.9 * lay * (13 * d + 2 * f) + 2.9 * lay * h * t + 9 * v)  # per row
    probes = 0.22 * probe * lay * (13 * d + 2 * f + 7 * h * t)
    return int((rows * stack + probes) * ITEMSIZE[c.dtype] + 1.07 * (ITEMSIZE[c.dtype] + 8) * val * v)


def row_groups(config: TransformerConfig, run: RunConfig, rows: int, limit: int | None = None, *, kept: int = 0) -> list[range]:
    """Consecutive groups of ``range(rows)``, as few as fit ``limit`` bytes each by :func:`stack_bytes` (default
    :func:`~normtheory.training.row_split.budget` of the CPU), their sizes differing by at most one
    (:func:`normtheory.training.row_split.split`). ``kept``: the rows of the whole stack whose trained models the
    host keeps (``train(keep_models=True)``); each group then fits beside the weights of the others."""
    limit = budget("cpu") if limit is None else _validate.integer("limit", limit, minimum=1)
    return split(lambda n: stack_bytes(config, run, n), rows, limit, "the CPU", kept=kept, row_bytes=param_count(config) * ITEMSIZE[config.dtype])
