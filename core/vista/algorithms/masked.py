"""Masked statistics over a whole batch (advantage whitening).

The formulas follow verl's ``masked_whiten`` (batch-wide mean, Bessel-corrected variance, ``1e-8``
inside the square root) so that our estimators and verl's agree to float precision; unlike verl, a
mask with fewer than two positions centres the values instead of raising.
"""

from __future__ import annotations

import torch

#: Added to the mask count (mean) and the variance (whitening), as verl does.
WHITEN_EPS = 1e-8


def masked_mean_var(values: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Mean, unbiased variance (0 with fewer than two positions) and count of ``values`` where
    ``mask`` is non-zero."""
    picked = values[mask.bool()]  # one compacting pass; the statistics then touch only these
    count = picked.numel()
    mean = picked.sum() / (count + WHITEN_EPS)
    if count < 2:
        return mean, torch.zeros_like(mean), count
    variance = (picked - mean).square().sum() / (count + WHITEN_EPS)
    return mean, variance * count / (count - 1), count


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(values - mean) / sqrt(var + 1e-8)`` with statistics over ``mask``; values everywhere.

    With fewer than two masked positions there is no variance to speak of: the values are only
    centred.
    """
    mean, variance, count = masked_mean_var(values, mask)
    if count < 2:
        return values - mean
    return (values - mean) * torch.rsqrt(variance + WHITEN_EPS)
