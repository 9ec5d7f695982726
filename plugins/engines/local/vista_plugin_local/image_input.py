"""The tensors of one image as the policy's vision tower takes them (shared by the chat encoder and
the model families, so neither imports the other)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class ImageInput:
    """One image as the vision tower takes it: its pixel tensor (Qwen-VL: flattened patches;
    InternVL: tiles) and, for grid-based families, its (t, h, w) grid.

    ``digest`` names the image's content (the rollout's image hash), so that training can encode
    each unique image once however many samples show it; ``None`` until someone knows it."""

    pixel_values: torch.Tensor
    grid_thw: torch.Tensor | None = None
    digest: str | None = None
