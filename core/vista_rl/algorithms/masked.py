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
    ``mask`` is non-zero.

    Sums of ``x`` and ``x**2`` in one sweep each (no boolean indexing, which costs a ``nonzero``);
    accumulated in float64, the ``E[x^2] - E[x]^2`` form is far below the tolerances that matter.
    """
    weights = mask.to(torch.float64)
    picked = values.to(torch.float64) * weights
    count = int(weights.sum().item())
    total = picked.sum()
    mean = total / (count + WHITEN_EPS)
    if count < 2:
        return mean.to(values.dtype), torch.zeros_like(mean).to(values.dtype), count
    squares = torch.dot(picked.reshape(-1), values.to(torch.float64).reshape(-1))
    variance = ((squares - total * total / count) / (count - 1)).clamp(min=0.0)
    return mean.to(values.dtype), variance.to(values.dtype), count


def masked_whiten(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(values - mean) / sqrt(var + 1e-8)`` with statistics over ``mask``; values everywhere.

    With fewer than two masked positions there is no variance to speak of: the values are only
    centred.
    """
    mean, variance, count = masked_mean_var(values, mask)
    if count < 2:
        return values - mean
    return (values - mean) * torch.rsqrt(variance + WHITEN_EPS)
