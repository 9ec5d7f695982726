"""The optimizer and its learning-rate schedule, and the guarded optimizer step both stages take.

One place for both stages (SFT and RL) so that they step, clip and skip non-finite updates the
same way; a checkpoint restores the optimizer and schedule exactly (:meth:`Optimization.load`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(total_steps: int, warmup: int, schedule: str) -> Callable[[int], float]:
    """The multiplier of the base learning rate at each optimizer step: linear warm-up over
    ``warmup`` steps, then constant, linear decay to 0 or a cosine to 0 at ``total_steps``."""
    total = max(total_steps, 1)

    def factor(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(total - warmup, 1))
        if schedule == "linear":
            return 1.0 - progress
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * progress))
        return 1.0

    return factor


class Optimization:
    """AdamW over ``params`` with a :func:`lr_factor` schedule."""

    def __init__(self, params: list[nn.Parameter], lr: float, *, betas: tuple[float, float], weight_decay: float,
                 total_steps: int, warmup: int = 0, schedule: str = "constant") -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; one of {', '.join(SCHEDULES)}")
        self.params = params
        self.optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_factor(total_steps, warmup, schedule))

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def step(self, max_grad_norm: float | None, loss: float) -> tuple[float, bool]:
        """Clip the accumulated gradients and step, unless the loss or the gradient norm is not
        finite: then the gradients are dropped and nothing moves.  Returns (norm, finite)."""
        params = [p for p in self.params if p.grad is not None]
        norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm if max_grad_norm is not None else float("inf"))
        finite = math.isfinite(loss) and bool(torch.isfinite(norm))
        if finite:
            self.optimizer.step()
            self.scheduler.step()
        else:
            self.zero_grad()
        return float(norm), finite

    def state(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict()}

    def load(self, checkpoint: dict[str, Any]) -> None:
        """Restore what :meth:`state` saved (either part may be missing from an older checkpoint)."""
        if checkpoint.get("optimizer") is not None:
            self.optimizer.load_state_dict(checkpoint["optimizer"])
        if checkpoint.get("scheduler") is not None:
            self.scheduler.load_state_dict(checkpoint["scheduler"])
