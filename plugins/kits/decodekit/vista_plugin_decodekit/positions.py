"""Position ids of tokens appended to a cached conversation, per model family.

Why this is not left to ``generate``: a Qwen-VL model numbers tokens with M-RoPE, where an image's
tokens take (t, h, w) positions and the text after it continues from the image's largest position
plus one.  ``generate`` computes those positions with ``get_rope_index`` over the whole input and
the images passed with it, and keeps a ``rope_deltas`` on the model that it recomputes only when
the cache is empty (transformers PR #36013; the QwenLM reports of wrong second-turn images): with
a cache that already holds earlier turns, and only the new images passed, its positions are wrong.
So the positions of the appended block are computed here, for the block alone with its own images
(``get_rope_index``, the model's own function), and shifted by where the cached prefix ends (its
largest position plus one, which is where ``get_rope_index`` would continue: for text the next
index, after an image its start plus ``max(h, w) / merge``).  They go to ``generate`` explicitly in
the layout it uses itself (``[4, rows, width]``: text positions, then t, h, w).

InternVL (and Qwen2 text) number tokens 0, 1, 2, ...: the block continues at the prefix length.
A model of another family is not cached (its positions may depend on things this module does not
know, such as Gemma 3's image attention), and the backend says so in its metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

#: ``config.model_type`` values whose positions are M-RoPE through ``get_rope_index``.
MROPE_TYPES = ("qwen2_vl", "qwen2_5_vl")
#: ``config.model_type`` values with plain 1-D positions for every token, images included.
LINEAR_TYPES = ("internvl",)


def unwrap(model: Any) -> Any:
    """The transformers model under a PEFT wrapper (``get_base_model``), or the model itself."""
    getter = getattr(model, "get_base_model", None)
    return getter() if callable(getter) else model


class LinearPositions:
    """Positions 0, 1, 2, ... over the real tokens (``generate``'s own rule from the attention mask)."""

    mrope = False

    def block(self, ids: torch.Tensor, images: Sequence[Mapping[str, torch.Tensor]], start: int,
              offset: int) -> torch.Tensor:
        """``[n]`` positions of the block ``ids`` that follows ``start`` cached tokens."""
        return torch.arange(start, start + int(ids.shape[0]), dtype=torch.long)

    def layout(self, rows: int, width: int) -> torch.Tensor:
        return torch.zeros((rows, width), dtype=torch.long)

    def place(self, layout: torch.Tensor, row: int, columns: slice, positions: torch.Tensor, start: int) -> None:
        layout[row, columns] = positions


class MRopePositions:
    """Qwen2-VL / Qwen2.5-VL positions (see the module docstring)."""

    mrope = True

    def __init__(self, model: Any) -> None:
        inner = unwrap(model)
        owner = getattr(inner, "model", inner)
        if not callable(getattr(owner, "get_rope_index", None)):
            raise TypeError(f"{type(inner).__name__} has no get_rope_index")
        self.owner = owner
        self.image_token_id = int(inner.config.image_token_id)

    def block(self, ids: torch.Tensor, images: Sequence[Mapping[str, torch.Tensor]], start: int,
              offset: int) -> torch.Tensor:
        """``[3, n]`` (t, h, w) positions of the block ``ids``, continuing at ``offset``."""
        if not images:
            return torch.arange(offset, offset + int(ids.shape[0]), dtype=torch.long).expand(3, -1)
        kinds = (ids == self.image_token_id).long()
        grids = torch.cat([image["image_grid_thw"].view(-1, 3) for image in images], dim=0)
        positions, _ = self.owner.get_rope_index(ids.view(1, -1), mm_token_type_ids=kinds.view(1, -1),
                                                 image_grid_thw=grids, attention_mask=None)
        return positions[:, 0].to(torch.long).cpu() + offset

    def layout(self, rows: int, width: int) -> torch.Tensor:
        return torch.zeros((4, rows, width), dtype=torch.long)

    def place(self, layout: torch.Tensor, row: int, columns: slice, positions: torch.Tensor, start: int) -> None:
        count = int(positions.shape[-1])
        layout[0, row, columns] = torch.arange(start, start + count, dtype=torch.long)  # text positions
        layout[1:, row, columns] = positions


PositionScheme = LinearPositions | MRopePositions


def position_scheme(model: Any) -> tuple[PositionScheme | None, str | None]:
    """The model's scheme, or ``None`` and why its conversations cannot be cached."""
    config = getattr(unwrap(model), "config", None)
    model_type = str(getattr(config, "model_type", ""))
    if model_type in MROPE_TYPES:
        try:
            return MRopePositions(model), None
        except (TypeError, AttributeError, ValueError) as exc:
            return None, f"{model_type}: {exc}"
    if model_type in LINEAR_TYPES:
        return LinearPositions(), None
    return None, (f"model_type {model_type or '?'} is not known to number its tokens plainly or by M-RoPE "
                  f"(cached: {', '.join(MROPE_TYPES + LINEAR_TYPES)})")
