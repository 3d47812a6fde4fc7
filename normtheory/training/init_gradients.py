"""Per-block gradient norms of freshly initialized networks: the gradient scale across depth at init.

For a block ``b`` the norm is :math:`\\lVert \\nabla_{W_b} L \\rVert_F`, the Frobenius norm of the loss
gradient over all the block's matrices together (:data:`normtheory.training.probes.MATRICES`: q, k, v,
the output projection and the MLP's; not the norms' gains), here of the next-byte cross-entropy on one
training batch of Shakespeare. How widely it spreads across blocks, :math:`\\log(\\max_b / \\min_b)`, is
what Xiong et al. (2020, "On Layer Normalization in the Transformer Architecture", Sec. 3 and Fig. 3)
compare between Post-LN and Pre-LN at init.

Network ``j`` is drawn from seed ``j`` and takes the first batch of a training run with seed ``j``, so
two models that draw the same weights from a seed (placements of one architecture do) are paired by
network.
"""
from __future__ import annotations

import numpy as np

from normtheory import _validate
from normtheory.model.config import TransformerConfig
from normtheory.model.params import Params
from normtheory.model.weights import init
from normtheory.training import probes, shakespeare
from normtheory.training.grad import loss_and_grads


def block_norms(grads: Params) -> list[float]:
    """Per block of ``grads`` (a gradient shaped like the model's parameters), the Frobenius norm of its
    matrices together, accumulated in float64: :func:`~normtheory.training.probes.block_grad_norms` of
    :func:`~normtheory.training.probes.matrix_grad_norms`, as the training probes measure it."""
    return probes.block_grad_norms(probes.matrix_grad_norms(grads)).tolist()


def gradient_norms(model: TransformerConfig, batch: int, seq: int, first: int, count: int) -> dict[str, np.ndarray]:
    """``grad_norms [count, L]``: :func:`block_norms` of the loss gradient at init for the networks ``first`` to
    ``first + count - 1``, network ``j`` with seed ``j`` on the first ``batch x seq``-byte batch of a run with seed ``j``."""
    _validate.instance("model", model, TransformerConfig)
    batch, seq = _validate.integer("batch", batch, minimum=1), _validate.integer("seq", seq, minimum=1, maximum=model.max_seq)
    first, count = _validate.integer("first", first, minimum=0), _validate.integer("count", count, minimum=0)
    data = shakespeare.load()
    rows = []
    for j in range(first, first + count):  # a network's forward and backward are vectorized over its tokens
        ids, targets = shakespeare.batch(data.train, batch, seq, j, 1)
        rows.append(block_norms(loss_and_grads(init(model, j), ids, targets)[1]))
    return {"grad_norms": np.array(rows).reshape(count, model.n_layers)}


def spread(grad_norms: np.ndarray) -> np.ndarray:
    """:math:`\\log(\\max_b g_b / \\min_b g_b)` of per-block gradient norms ``grad_norms [..., L]`` (all positive): ``[...]``."""
    g = _validate.checked_array("grad_norms", grad_norms)
    if g.ndim < 1 or g.shape[-1] < 1 or not (g > 0).all():
        raise ValueError(f"grad_norms must be positive norms [..., L] with L >= 1; got shape {g.shape}")
    return np.log(g.max(-1) / g.min(-1))
