"""Per-group statistics of per-sample scores (GRPO-style baselines), vectorised with index_add.

Samples of one prompt/seed share a group id.  Ids may be a tensor of integers or any sequence of
hashables (verl passes uid strings as a numpy array).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


def group_index(group_ids: Any, batch_size: int, device: torch.device | None = None) -> torch.Tensor:
    """Dense ``0..G-1`` group indices (``[batch]`` long tensor) for arbitrary group ids."""
    if isinstance(group_ids, torch.Tensor):
        ids = group_ids.reshape(-1)
        if ids.numel() != batch_size:
            raise ValueError(f"group_ids has {ids.numel()} entries for a batch of {batch_size}")
        _, inverse = torch.unique(ids, return_inverse=True)
        return inverse.to(device=device if device is not None else ids.device, dtype=torch.long)
    if not isinstance(group_ids, Sequence) and not hasattr(group_ids, "__len__"):
        raise TypeError(f"group_ids must be a tensor or a sequence, got {type(group_ids).__name__}")
    values = list(group_ids)
    if len(values) != batch_size:
        raise ValueError(f"group_ids has {len(values)} entries for a batch of {batch_size}")
    dense: dict[Any, int] = {}
    indices = [dense.setdefault(value, len(dense)) for value in values]
    return torch.tensor(indices, dtype=torch.long, device=device)


@dataclass
class GroupStats:
    """Per-sample views of group statistics (all ``[batch]``)."""

    count: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    total: torch.Tensor


def group_stats(scores: torch.Tensor, index: torch.Tensor) -> GroupStats:
    """Count, mean, unbiased std and sum of each sample's group, broadcast back to the samples.

    Singleton groups get mean 0 and std 1 (verl's convention: a lone sample keeps its score).
    """
    groups = int(index.max().item()) + 1 if index.numel() else 0
    count = torch.zeros(groups, dtype=scores.dtype, device=scores.device).index_add_(
        0, index, torch.ones_like(scores)
    )
    total = torch.zeros_like(count).index_add_(0, index, scores)
    mean = total / count
    deviation = scores - mean[index]
    squares = torch.zeros_like(count).index_add_(0, index, deviation.square())
    std = (squares / (count - 1).clamp(min=1)).sqrt()
    single = count < 2
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)
    return GroupStats(count=count[index], mean=mean[index], std=std[index], total=total[index])
