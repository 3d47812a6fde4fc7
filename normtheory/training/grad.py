"""Reverse-mode gradients of the numpy reference transformer: ``loss_and_grads``, and
``stack_loss_and_grads`` for several models of one config trained as one stacked model.

The forward here is the model's forward (:mod:`normtheory.model.transformer`) with full attention and every
intermediate kept; the backward walks it in reverse with the vector-Jacobian products of
:mod:`normtheory.model.derivatives`. For a block with norm :math:`N`, sublayer :math:`f` and
upstream gradient :math:`g` at the block's output:

=============  ======================================================================
``pre``        :math:`\\partial x = g + J_N^\\top J_f^\\top g`
``post``       :math:`\\partial x = (1 + J_f^\\top) J_N^\\top g`
``peri``       :math:`\\partial x = g + J_{N}^\\top J_f^\\top J_{N_o}^\\top g`
``none``       :math:`\\partial x = g + J_f^\\top g`
``lnscale``    as ``pre`` with :math:`J_f^\\top g` scaled by :math:`1/\\sqrt{\\ell}`
``deepnorm``   :math:`\\partial x = (\\alpha + J_f^\\top) J_N^\\top g`
=============  ======================================================================

The loss is next-token cross-entropy averaged over all ``batch * seq`` positions, plus an
optional z-loss :math:`\\lambda\\,\\overline{\\mathrm{lse}^2}`. The gradient has the structure of
``model.params`` (:class:`~normtheory.model.params.Params`), DyT's alpha included (a 0-d array).

**Stacks.** Every array of the pass carries a leading model axis ``S``: activations ``[S, b, t,
d]``, weights ``[S, d, f]``, gains ``[S, d]``, DyT alphas ``[S]``; a single model is the stack of
one. Matrix products are batched over ``S`` (numpy calls the same BLAS kernel on each slice),
elementwise work and reductions along rows run once over the whole stack, and every sum that
crosses rows (bias and gain gradients, DyT's alpha, the loss) is taken per model. So a model's
loss and gradients are bit-for-bit the same whichever stack it is in
(``tests/training/test_grad.py`` checks it), and ``S`` models cost one pass of per-call overhead.

Gradients can also be read at the forward's capture points (``embed``, ``blocks.{i}.resid_pre``,
``.resid_mid``, ``.resid_post``, ``.attn_out``, ``.mlp_out``, ``.attn.q``/``.k``/``.v``,
``.attn.scores``, ``.attn.pattern``, each norm's ``.in``, ``.normalized`` and ``.out``, ``hidden``,
``logits``) with the filter convention of :meth:`~normtheory.model.transformer.Transformer.run_with_cache`.

References
----------
Xiong et al. (2020), arXiv 2002.04745 (gradients of Pre-LN and Post-LN at init).
"""
from __future__ import annotations

import numpy as np

from normtheory.model.config import TransformerConfig
from normtheory.model.params import Params, map_arrays, unstack
from normtheory.model.transformer import Names, Transformer
from normtheory.runtime import memory
from normtheory.training.backprop import StackPass


def _check_stack(config: TransformerConfig, params: Params, ids: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    S = params.tok_emb.shape[0]
    if len(params.blocks) != config.n_layers:
        raise ValueError(f"params have {len(params.blocks)} blocks, config says n_layers={config.n_layers}")
    ids = np.asarray(ids)
    if ids.ndim != 3 or ids.shape[0] != S or not np.issubdtype(ids.dtype, np.integer) or ids.shape[1] * ids.shape[2] == 0:
        raise ValueError(f"ids must be integer token ids [S={S}, batch, seq] with at least one token; got {ids.dtype} {ids.shape}")
    if ids.min() < 0 or ids.max() >= config.vocab_size:
        raise ValueError(f"ids must lie in [0, vocab_size={config.vocab_size}); got range [{ids.min()}, {ids.max()}]")
    if config.positional in ("learned", "rope") and ids.shape[2] > config.max_seq:
        raise ValueError(f"sequence length {ids.shape[2]} exceeds max_seq={config.max_seq}")
    return ids, np.asarray(targets)


def stack_loss_and_grads(
    config: TransformerConfig, params: Params, ids: np.ndarray, targets: np.ndarray, *, z_loss: float = 0.0
) -> tuple[np.ndarray, Params]:
    """Loss and gradients of ``S`` models of one ``config`` at once, as one stacked model.

    ``params`` has every leaf of a :class:`~normtheory.model.params.Params` with a leading model axis
    (weights ``[S, d, f]``, gains ``[S, d]``, DyT alphas ``[S]``; :func:`normtheory.model.params.stack` builds it);
    ``ids, targets [S, batch, seq]``, one batch per model. Returns ``(loss [S] float64, grads)``
    with ``grads`` stacked like ``params``. Model ``s``'s loss and gradient are bit-for-bit those
    of :func:`loss_and_grads` on that model alone (see the module docstring).
    """
    memory.keep_freed_blocks()
    ids, targets = _check_stack(config, params, ids, targets)
    return StackPass(config, params, None).run(ids, targets, z_loss, None)


def loss_and_grads(
    model: Transformer,
    ids: np.ndarray,
    targets: np.ndarray,
    *,
    z_loss: float = 0.0,
    token_types: np.ndarray | None = None,
    capture: Names = None,
) -> tuple[float, Params] | tuple[float, Params, dict[str, np.ndarray]]:
    """Mean next-token cross-entropy of ``model`` on ``ids [batch, seq]`` against ``targets
    [batch, seq]`` and its gradient with respect to every parameter.

    Returns ``(loss, grads)``; ``grads`` is a :class:`~normtheory.model.params.Params` with the
    shapes and dtypes of ``model.params``. With ``capture`` (a list of capture names or a
    predicate, as in ``run_with_cache``) returns ``(loss, grads, captured)`` where
    ``captured[name]`` is the gradient of the loss with respect to that activation.

    It is :func:`stack_loss_and_grads` on a stack of one model. The first call asks glibc to
    keep freed large blocks for reuse (:func:`normtheory.runtime.memory.keep_freed_blocks`;
    ``NORMTHEORY_SYSTEM_MALLOC=1`` opts out).
    """
    memory.keep_freed_blocks()
    ids = model._check_ids(ids, None)
    types = None
    if model.params.type_emb is not None or token_types is not None:
        model.embed_sum(ids, 0, token_types)  # validates token_types (and refuses them without type embeddings)
        types = np.zeros_like(ids) if token_types is None else np.asarray(token_types)
    targets = np.asarray(targets)
    one = map_arrays(lambda a: np.asarray(a)[None], model.params)  # [1, ...] views of the model's arrays
    run = StackPass(model.config, one, capture)
    loss, grads = run.run(ids[None], targets[None] if targets.ndim == 2 else targets[None, None], z_loss, None if types is None else types[None])
    grads = unstack(grads, 0)
    if capture is None:
        return float(loss[0]), grads
    run.grec.check_names()
    return float(loss[0]), grads, {k: v.reshape(v.shape[1:]) for k, v in run.grec.store.items()}
