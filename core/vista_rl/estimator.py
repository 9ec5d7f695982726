"""The advantage-estimator contract: pure torch over padded batches.

One function signature serves the embedded engine and verl's estimator registry.  Tensors are
``[batch, tokens]`` unless noted; torch is imported only for type checking so ``import vista_rl`` stays
light.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


@dataclass
class AdvantageBatch:
    """Inputs of an estimator.

    - ``token_rewards``: reward placed on tokens (e.g. each turn's reward at its last token).
    - ``response_mask``: 1 on tokens the policy generated (loss mask).
    - ``advantage_mask``: where advantages are non-zero; defaults to ``response_mask`` (VAGEN keeps
      the two separate).
    - ``group_ids``: ``[batch]`` ids of samples from the same prompt/seed (GRPO, RLOO).
    - ``values``: critic values for the GAE family.
    - ``turn_ends``: 1 at the last token of every assistant turn (turn-level estimators).
    """

    token_rewards: torch.Tensor
    response_mask: torch.Tensor
    advantage_mask: torch.Tensor | None = None
    group_ids: torch.Tensor | None = None
    values: torch.Tensor | None = None
    turn_ends: torch.Tensor | None = None


@dataclass
class AdvantageOutput:
    advantages: torch.Tensor
    returns: torch.Tensor


class AdvantageEstimator(Protocol):
    """``estimator(batch, **params) -> AdvantageOutput``."""

    def __call__(self, batch: AdvantageBatch, /, **params: float) -> AdvantageOutput: ...
