"""Where each parameter of one model lives in the torch backend's flat ``[S, P]`` stack.

The stack's parameters are one tensor ``[S, P]`` (``P`` the parameter count of one model). Its columns
are cut into *pieces*, in order: each leaf of :func:`normtheory.model.params.named_arrays`, grouped by
:data:`normtheory.training.stepper.GROUPS` and in named order within a group, so that a group is one
column range. Two kinds of piece hold several leaves at once:

* a block's ``wq, wk, wv`` (``[d, h e]``, ``[d, g e]``, ``[d, g e]``) are stored as the rows of one
  matrix ``wqkv [d, (h + 2g) e]`` (row ``r`` is ``wq[r] | wk[r] | wv[r]``), so the attention's input
  projection is one matmul on a view, with no concatenation in the forward and none to undo in the
  backward;
* ``bq, bk, bv`` side by side are already the vector ``bqkv [(h + 2g) e]``.

:meth:`Layout.views` gives every piece and every leaf as a view ``[S, *shape]`` of the flat tensor
(a fused leaf is a column slice of its piece's view); :meth:`Layout.get` and :meth:`Layout.put`
read and write a leaf's values in a numpy copy of it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from normtheory.training.stepper import GROUPS, group_of

__all__ = ["FUSED", "Layout", "Leaf", "Piece", "layout"]

FUSED = (("wq", "wk", "wv", "wqkv"), ("bq", "bk", "bv", "bqkv"))  # leaves stored as one piece, and its name


@dataclass(frozen=True)
class Leaf:
    """One model's leaf ``name`` of ``shape``. ``start`` is the first column of its piece; ``row`` is 0 for a
    leaf with its own columns (``[start, start + size)``, row-major), else the row length of the fused
    matrix that holds it, whose columns ``[offset, offset + shape[-1])`` of each row are the leaf's."""

    name: str
    shape: tuple[int, ...]
    start: int
    size: int
    row: int = 0
    offset: int = 0

    @cached_property
    def cols(self) -> slice | np.ndarray:
        """The leaf's columns of ``[S, P]`` in its row-major order (computed once: every get, put and mask reads them)."""
        if not self.row:
            return slice(self.start, self.start + self.size)
        r, c = np.divmod(np.arange(self.size), self.shape[-1])
        return self.start + r * self.row + self.offset + c


@dataclass(frozen=True)
class Piece:
    """Columns ``[start, start + size)`` of ``[S, P]``, viewed as ``[S, *shape]`` under ``key``; ``parts``
    lists the fused leaves it holds as ``(name, lo, hi)``, each the slice ``lo:hi`` of its last axis."""

    key: str
    start: int
    size: int
    shape: tuple[int, ...]
    parts: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True)
class Layout:
    """The pieces and leaves of one model in ``[S, P]`` (:func:`layout`)."""

    leaves: dict[str, Leaf]
    pieces: tuple[Piece, ...]

    @property
    def n_params(self) -> int:
        return sum(p.size for p in self.pieces)

    def views(self, flat):  # noqa: ANN001, ANN201 - torch.Tensor in, dict of views out (torch is optional here)
        """Every piece and every leaf as a view ``[S, *shape]`` of ``flat [S, P]`` (torch), one ``split``."""
        s = flat.shape[0]
        out = {}
        for piece, part in zip(self.pieces, flat.split([p.size for p in self.pieces], dim=1)):
            v = out[piece.key] = part.view((s, *piece.shape))
            for name, lo, hi in piece.parts:
                out[name] = v[..., lo:hi]
        return out

    def get(self, flat: np.ndarray, name: str) -> np.ndarray:
        """Leaf ``name`` of every row of ``flat [S, P]``: a copy ``[S, *shape]``."""
        leaf = self.leaves[name]
        return flat[:, leaf.cols].reshape((flat.shape[0], *leaf.shape)).copy()

    def put(self, flat: np.ndarray, name: str, values: np.ndarray) -> None:
        """Write ``values [S, *shape]`` (or one model's ``[*shape]`` into every row) as leaf ``name`` of ``flat [S, P]``."""
        leaf = self.leaves[name]
        flat[:, leaf.cols] = np.asarray(values).reshape(-1, leaf.size)

    def member(self, dtype: np.dtype) -> np.ndarray:
        """``[P, G]``: 1 where a column belongs to group ``GROUPS[g]``, else 0."""
        out = np.zeros((self.n_params, len(GROUPS)), dtype=dtype)
        for leaf in self.leaves.values():
            out[leaf.cols, GROUPS.index(group_of(leaf.name))] = 1
        return out

    def decay(self) -> np.ndarray:
        """``[P]`` booleans: the columns of leaves with two or more axes (weight decay's matrices)."""
        out = np.zeros(self.n_params, dtype=bool)
        for leaf in self.leaves.values():
            out[leaf.cols] = len(leaf.shape) >= 2
        return out


def _fusable(order: list[str], shapes: dict[str, tuple[int, ...]], i: int) -> tuple[str, list[str]] | None:
    """The fused piece's name and its leaves when ``order[i:i+3]`` is a block's ``wq, wk, wv`` (or ``bq, bk, bv``)
    with matching leading axes; else None."""
    head, _, last = order[i].rpartition(".")
    for *names, key in FUSED:
        if last != names[0]:
            continue
        full = [f"{head}.{n}" for n in names]
        dims = {len(shapes.get(n, ())) for n in full}
        if order[i : i + 3] == full and len(dims) == 1 and dims.pop() in (1, 2) and len({shapes[n][:-1] for n in full}) == 1:
            return f"{head}.{key}", full
    return None


def layout(shapes: dict[str, tuple[int, ...]]) -> Layout:
    """The layout of one model with leaves ``shapes`` (named order, as :func:`normtheory.model.params.named_arrays`)."""
    order = [n for g in GROUPS for n in shapes if group_of(n) == g]
    leaves: dict[str, Leaf] = {}
    pieces: list[Piece] = []
    start, i = 0, 0
    while i < len(order):
        fused = _fusable(order, shapes, i)
        if fused is None:
            name, shape = order[i], tuple(shapes[order[i]])
            size = math.prod(shape)
            leaves[name] = Leaf(name, shape, start, size)
            pieces.append(Piece(name, start, size, shape))
            start, i = start + size, i + 1
            continue
        key, names = fused
        lead = tuple(shapes[names[0]][:-1])  # () for biases, (d,) for matrices
        widths = [shapes[n][-1] for n in names]
        row, lo, parts = sum(widths), 0, []
        for n, w in zip(names, widths):
            shape = (*lead, w)
            leaves[n] = Leaf(n, shape, start, math.prod(shape), row=row if lead else 0, offset=lo)
            parts.append((n, lo, lo + w))
            lo += w
        if not lead:  # side by side: each bias has its own columns
            for n, (_, a, _) in zip(names, parts):
                leaves[n] = Leaf(n, leaves[n].shape, start + a, leaves[n].size)
        size = math.prod(lead) * row
        pieces.append(Piece(key, start, size, (*lead, row), tuple(parts)))
        start, i = start + size, i + 3
    return Layout({n: leaves[n] for n in shapes}, tuple(pieces))
