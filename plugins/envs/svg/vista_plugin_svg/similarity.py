"""Image similarity scores between a render and its target, each in [0, 1] (1 = identical).

Pixel and SSIM need nothing but NumPy, so the env scores offline with no weights; the embedding
score (DINO/DreamSim-class) goes through a pluggable encoder (:mod:`.encoders`).  The reward combines
them as VAGEN's SVG env does: ``max(0, sum(weight_i * score_i))`` plus the format reward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from PIL import Image


def _array(image: Image.Image, mode: str, size: tuple[int, int]) -> np.ndarray:
    if image.size != size:
        image = image.resize(size, Image.Resampling.BILINEAR)
    return np.asarray(image.convert(mode), dtype=np.float64)


def pixel_score(render: Image.Image, target: Image.Image) -> float:
    """``1 - mean |render - target| / 255`` over RGB pixels (render resized to the target first)."""
    a = _array(render, "RGB", target.size)
    b = _array(target, "RGB", target.size)
    return float(1.0 - np.abs(a - b).mean() / 255.0)


def _box_mean(x: np.ndarray, window: int) -> np.ndarray:
    """Mean over each ``window`` x ``window`` patch fully inside ``x`` (an integral-image box filter)."""
    padded = np.pad(x.cumsum(0).cumsum(1), ((1, 0), (1, 0)))
    total = (padded[window:, window:] - padded[:-window, window:] - padded[window:, :-window]
             + padded[:-window, :-window])
    return total / float(window * window)


def ssim_score(render: Image.Image, target: Image.Image, window: int = 7) -> float:
    """Mean structural similarity (Wang et al. 2004, box window, grey levels), clipped to [0, 1].

    A box window rather than a Gaussian one keeps it a few NumPy lines; the ranking of renders is
    what the reward needs, not agreement with a particular library to the third decimal."""
    a = _array(render, "L", target.size)
    b = _array(target, "L", target.size)
    window = max(1, min(window, *a.shape))
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mu_a, mu_b = _box_mean(a, window), _box_mean(b, window)
    var_a = _box_mean(a * a, window) - mu_a ** 2
    var_b = _box_mean(b * b, window) - mu_b ** 2
    cov = _box_mean(a * b, window) - mu_a * mu_b
    ssim = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return float(np.clip(ssim.mean(), 0.0, 1.0))


def cosine_score(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two embedding vectors, clipped to [0, 1] (DreamSim's ``1 - distance``)."""
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
    if denominator == 0.0 or not np.isfinite(denominator):
        return 0.0
    return float(np.clip(np.dot(a, b) / denominator, 0.0, 1.0))


@dataclass(frozen=True)
class RewardWeights:
    """Weights of the similarity terms in the SVG reward."""

    pixel: float = 0.0
    ssim: float = 1.0
    embedding: float = 0.0


def combine(scores: Mapping[str, float], weights: RewardWeights) -> float:
    """VAGEN's similarity term: ``max(0, w_pixel*pixel + w_ssim*ssim + w_embedding*embedding)``.

    A term whose weight is 0 is not required in ``scores``."""
    total = 0.0
    for name in ("pixel", "ssim", "embedding"):
        weight = getattr(weights, name)
        if weight:
            total += weight * scores[name]
    return max(0.0, total)
