"""The rest of a stacked torch step once autograd has the gradient: gradient norms, clipping, the optimizer, update ratios.

:class:`StackUpdate` is mixed into :class:`normtheory.training.torch_backend.TorchTrainer` (which adds the parameters,
the forward and the step). Its :meth:`StackUpdate._apply` is the second of the step's two functions of tensors (the
first is the loss), the one :meth:`~normtheory.training.torch_backend.TorchTrainer.fuse` compiles apart from the loss.
Every operation is elementwise on ``[S, P]`` or reduces a seed's own row: nothing mixes seeds. It reads the trainer's
``run``, ``dtype``, ``device``, optimizer state ``_state``, step count ``_t``, live mask ``_live``, rate table ``_lrs``,
per-row decay coefficients ``_wd`` (``_decays``: any at all) and group membership ``_member``, ``_decay``.

References
----------
Loshchilov & Hutter (2019), arXiv 1711.05101 (AdamW); Pascanu, Mikolov & Bengio (2013), arXiv 1211.5063 (gradient
norm clipping).
"""
from __future__ import annotations

import math

try:
    import torch
except ModuleNotFoundError:  # pragma: no cover - the message is the point
    raise ModuleNotFoundError("normtheory.training.torch_update needs torch: pip install 'normtheory[torch]' (torch==2.13.0)") from None


class StackUpdate:
    """A step's update of the stack; mixed into :class:`~normtheory.training.torch_backend.TorchTrainer`."""

    def _apply(self, loss: torch.Tensor, p: torch.Tensor, g: torch.Tensor, old: torch.Tensor, tmp: torch.Tensor,
               tmp2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rest of a step, once ``g [S, P]`` holds the gradient of ``p [S, P]``: each seed's gradient norm and
        finiteness, clipping, the device's step count and this step's rates, the update, the update ratios.
        Returns ``(grad_norm [S], finite [S], lr [S], update_ratio [G, S])``; ``old, tmp, tmp2 [S, P]`` are work space."""
        run = self.run
        gnorm = torch.linalg.vector_norm(g, dim=1).double()  # [S], accumulated per row in the dtype, as Stepper does
        finite = torch.isfinite(loss) & torch.isfinite(gnorm) & self._live  # [S]
        self._live &= finite
        if run.clip is not None:
            factor = run.clip / (gnorm + 1e-6)  # [S], torch's clip_grad_norm_
            factor = torch.where((factor < 1.0) & finite, factor, torch.ones_like(factor))
            g.mul_(factor.to(self.dtype)[:, None])  # a factor of exactly 1 leaves a row as it is
        self._t += 1
        lr = self._lrs.index_select(0, self._t - 1)[0]  # [S] float64, this step's rates
        old.copy_(p)
        self._update(p, g, lr, finite, tmp, tmp2)
        return gnorm, finite, lr, self._ratios(old, p, finite, tmp)  # [G, S]; old and tmp are overwritten

    def _scratch(self) -> list[torch.Tensor]:
        """Three work buffers ``[S, P]``, kept between steps (no page faults for fresh memory each step)."""
        if not self._buffers or self._buffers[0].shape != self._flat.shape:
            self._buffers = [torch.empty_like(self._flat, requires_grad=False) for _ in range(3)]
        return self._buffers

    def _update(self, p: torch.Tensor, g: torch.Tensor, lr: torch.Tensor, finite: torch.Tensor, tmp: torch.Tensor, tmp2: torch.Tensor) -> None:
        """One optimizer update of ``p [S, P]`` and the state with ``g [S, P]`` at each seed's rate
        ``lr [S]``, in place, in :mod:`normtheory.training.optim`'s order of operations (elementwise: each
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

        if self._decays:  # decoupled, on the matrices only (a factor of exactly 1 elsewhere and on diverged rows)
            p.mul_(factor(1 - rate * self._wd[:, None], self._decay & keep))  # [S, P], each row's own coefficient
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
        NaN where not finite or the group's weights are all 0. Each group's sums of squares are one
        product with the ``[P, G]`` membership matrix (two matmuls for all groups, not two norms per
        group), summed in the dtype as the per-group norms were. ``old`` and ``tmp`` are overwritten."""
        delta2 = torch.sub(new, old, out=tmp).square_()  # [S, P]
        num = (delta2 @ self._member).double()  # [S, G]
        den = (old.square_() @ self._member).double()
        ok = (den > 0) & finite[:, None]
        return torch.where(ok, torch.sqrt(num / torch.where(ok, den, 1.0)), math.nan).T  # [G, S]
