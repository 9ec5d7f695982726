"""Summary statistics with 95% confidence intervals, so every reported number carries its error."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959963984540054


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, float | int]:
        return {"value": self.value, "ci95_low": self.low, "ci95_high": self.high, "n": self.n}

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def proportion(successes: int, n: int) -> Estimate:
    """Wilson score interval: well-behaved at 0%, 100% and small n, unlike the normal interval."""
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    p = successes / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / denom
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), n)


def mean(values: Sequence[float]) -> Estimate:
    """Mean with a normal-approximation interval (sample standard deviation)."""
    n = len(values)
    if n == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    mu = sum(values) / n
    if n == 1:
        return Estimate(mu, mu, mu, 1)
    var = sum((v - mu) ** 2 for v in values) / (n - 1)
    half = Z95 * math.sqrt(var / n)
    return Estimate(mu, mu - half, mu + half, n)
