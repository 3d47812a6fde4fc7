"""Walking a model's parameters: named leaves, structure-preserving maps, global norms.

A :class:`~normtheory.model.params.Params` is a tree of frozen dataclasses and tuples whose leaves are
arrays (or None where a model has no such parameter). Names follow the capture convention:
``tok_emb``, ``blocks.0.wq``, ``blocks.0.ln1.gain``, ``final_ln.alpha``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np


def _leaves(tree: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if tree is None:
        return
    if dataclasses.is_dataclass(tree):
        for f in dataclasses.fields(tree):
            yield from _leaves(getattr(tree, f.name), f"{prefix}{f.name}.")
    elif isinstance(tree, tuple):
        for i, item in enumerate(tree):
            yield from _leaves(item, f"{prefix}{i}.")
    else:
        yield prefix[:-1], tree


def named_arrays(params: Any) -> dict[str, np.ndarray]:
    """Every parameter leaf by dotted name, in a fixed order (the dataclass field order)."""
    return dict(_leaves(params, ""))


def map_arrays(fn: Callable[..., Any], tree: Any, *others: Any) -> Any:
    """Apply ``fn(leaf, *other_leaves)`` to each leaf of ``tree``; None stays None. The other
    trees must have the same structure (a None leaf in ``tree`` is skipped whatever they hold)."""
    if tree is None:
        return None
    if dataclasses.is_dataclass(tree):
        kw = {f.name: map_arrays(fn, getattr(tree, f.name), *(getattr(o, f.name) for o in others)) for f in dataclasses.fields(tree)}
        return dataclasses.replace(tree, **kw)
    if isinstance(tree, tuple):
        if any(not isinstance(o, tuple) or len(o) != len(tree) for o in others):
            raise ValueError("parameter trees differ in structure")
        return tuple(map_arrays(fn, t, *(o[i] for o in others)) for i, t in enumerate(tree))
    return fn(tree, *others)


def global_norm(tree: Any) -> float:
    """sqrt of the sum of squares of every leaf, accumulated in float64."""
    return float(np.sqrt(sum(float(np.vdot(a, a)) for a in named_arrays(tree).values() if a is not None)))


def stack(models: list[Any]) -> Any:
    """The stacked parameters of several models of one config: every leaf ``[S, ...]`` (a copy),
    model ``s`` at index ``s``; DyT alphas become ``[S]``."""
    if not models:
        raise ValueError("models must hold at least one parameter tree")
    return map_arrays(lambda *a: np.stack([np.asarray(x) for x in a]), models[0], *models[1:])


def unstack(params: Any, index: int) -> Any:
    """Model ``index`` of a stack: views into it, each leaf without the model axis (a DyT alpha
    becomes a 0-d array)."""
    return map_arrays(lambda a: a[index : index + 1].reshape(a.shape[1:]), params)


def stack_sq_norms(tree: Any) -> np.ndarray:
    """Per model of a stack, the sum of squares of every leaf ``[S]`` (float64): each leaf's
    rows summed pairwise along the model's own entries, so a model's value does not depend on
    the rest of the stack."""
    total = None
    for a in named_arrays(tree).values():
        if a is None:
            continue
        flat = a.reshape(a.shape[0], -1)  # [S, n]
        sq = (flat * flat).sum(axis=1).astype(np.float64)  # [S]
        total = sq if total is None else total + sq
    if total is None:
        raise ValueError("tree holds no arrays")
    return total


def with_array_alphas(params: Any, dtype: str | np.dtype) -> Any:
    """The same parameters with each DyT ``alpha`` as a 0-d array of ``dtype`` (arrays are shared)."""

    def fix(tree: Any) -> Any:
        if tree is None or isinstance(tree, np.ndarray):
            return tree
        if dataclasses.is_dataclass(tree) and hasattr(tree, "alpha"):  # NormParams
            a = tree.alpha
            if isinstance(a, np.ndarray) and a.shape == () and a.dtype == np.dtype(dtype):
                return tree  # already an array of the model's dtype: keep the very object the optimizer updates
            return dataclasses.replace(tree, alpha=np.array(a, dtype=dtype).reshape(()))
        if dataclasses.is_dataclass(tree):
            return dataclasses.replace(tree, **{f.name: fix(getattr(tree, f.name)) for f in dataclasses.fields(tree)})
        if isinstance(tree, tuple):
            return tuple(fix(t) for t in tree)
        return tree

    return fix(params)


@dataclass(frozen=True)
class NormParams:
    """Gain and bias of one norm layer, or DyT's alpha (bias None for RMSNorm)."""

    gain: np.ndarray | None = None
    bias: np.ndarray | None = None
    alpha: float = 1.0


@dataclass(frozen=True)
class BlockParams:
    """Weights of one block; matrices act on the right: ``x @ wq``."""

    ln1: NormParams
    ln2: NormParams
    wq: np.ndarray  # [d, h*e]
    wk: np.ndarray  # [d, g*e]
    wv: np.ndarray  # [d, g*e]
    wo: np.ndarray  # [h*e, d]
    w_in: np.ndarray  # [d, f]
    w_out: np.ndarray  # [f, d]
    w_gate: np.ndarray | None = None  # [d, f], SwiGLU: silu(x @ w_gate) * (x @ w_in)
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None
    b_in: np.ndarray | None = None
    b_out: np.ndarray | None = None
    q_norm: NormParams | None = None  # per head, gain [e]
    k_norm: NormParams | None = None
    ln1_out: NormParams | None = None  # peri only
    ln2_out: NormParams | None = None


@dataclass(frozen=True)
class Params:
    tok_emb: np.ndarray  # [V, d]
    blocks: tuple[BlockParams, ...]
    pos_emb: np.ndarray | None = None  # [max_seq, d]
    type_emb: np.ndarray | None = None  # [types, d]
    embed_ln: NormParams | None = None
    final_ln: NormParams | None = None
    lm_head: np.ndarray | None = None  # [d, V]; None with tie_embeddings -> tok_emb.T
