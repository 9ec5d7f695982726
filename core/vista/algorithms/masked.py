"""Masked statistics over a whole batch (advantage whitening).

The formulas follow verl's ``masked_whiten`` (batch-wide mean, Bessel-corrected variance, ``1e-8``
inside the square root) so that our estimators and verl's agree to float precision; unlike verl, a
mask with fewer than two positions centres the values instead of raising.
"""

from __future__ import annotations

import torch

#: Added to the mask count (mean) and the variance (whitening), as verl does.
WHITEN_EPS = 1e-8


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is non-zero (a 0-d tensor)."""
    weights = mask.to(values.dtype)
    return (values * weights).sum() / (weights.sum() + WHITEN_EPS)


def masked_var(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Unbiased variance of ``values`` where ``mask`` is non-zero (0 with fewer than two positions)."""
    weights = mask.to(values.dtype)
    count = weights.sum()
    centred = values - masked_mean(values, mask)
    variance = (centred.square() * weights).sum() / (count + WHITEN_EPS)
    if count < 2:
        return torch.zeros_like(variance)
    return variance * count / (count - 1)


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(values - mean) / sqrt(var + 1e-8)`` with statistics over ``mask``; values everywhere.

    With fewer than two masked positions there is no variance to speak of: the values are only
    centred.
    """
    mean = masked_mean(values, mask)
    if mask.to(values.dtype).sum() < 2:
        return values - mean
    return (values - mean) * torch.rsqrt(masked_var(values, mask) + WHITEN_EPS)
