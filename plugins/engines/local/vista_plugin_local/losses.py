"""Loss pieces of the local engine: clipped policy loss, KL to a reference, entropy, value loss and
the two aggregation modes.

Aggregation takes explicit denominators so that gradient accumulation over micro-batches gives the
same gradient as one big batch: ``token-mean`` divides by the tokens of the whole mini-batch,
``seq-mean`` by its number of sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Denominators:
    tokens: float
    sequences: float


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: str, denom: Denominators) -> torch.Tensor:
    """Sum of this micro-batch's share of the mini-batch mean."""
    if mode == "token-mean":
        return (values * mask).sum() / max(denom.tokens, 1.0)
    if mode == "seq-mean":
        per_seq = (values * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
        return per_seq.sum() / max(denom.sequences, 1.0)
    raise ValueError(f"unknown loss aggregation {mode!r}; use token-mean or seq-mean")


def clipped_policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                        clip_low: float, clip_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's per-token loss ``max(-A r, -A clip(r, 1-low, 1+high))`` and where clipping was active."""
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    return loss, (clipped > unclipped).float()


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(policy || reference): unbiased, always >= 0, low variance."""
    log_ratio = (ref_logprobs - logprobs).clamp(-20.0, 20.0)
    return torch.exp(log_ratio) - log_ratio - 1.0


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               clip: float | None) -> torch.Tensor:
    """Per-token 0.5 * squared error, clipped around the rollout-time values as in PPO."""
    error = (values - returns) ** 2
    if clip is None:
        return 0.5 * error
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    return 0.5 * torch.maximum(error, (clipped - returns) ** 2)
