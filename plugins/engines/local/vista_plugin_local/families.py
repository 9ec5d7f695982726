"""The built-in VLM families of the local engine (Qwen2-VL / Qwen2.5-VL and InternVL) and the
lookup that picks a checkpoint's family from the ``register_model_families`` registry.

Everything family-specific the engine does (image token expansion, image processor output,
batched vision tensors, M-RoPE state) is here; :mod:`vista_plugin_local.chat_tokens` and
:mod:`vista_plugin_local.policy` only call the :class:`~vista_rl.model_family.ModelFamily` interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from PIL import Image

from vista_plugin_local.image_input import ImageInput
from vista_plugin_local.shared_vision import base_model, image_key
from vista_rl import ConfigError, ModelFamily
from vista_rl.chat_render import registered_family


class TokenRow(Protocol):
    """What positions are computed from: a row's token ids and its images in order
    (:class:`vista_plugin_local.chat_tokens.EpisodeTokens` is one; named by shape so that this
    module, which chat_tokens imports, does not import it back)."""

    input_ids: list[int]
    images: list[ImageInput]

    def __len__(self) -> int: ...

__all__ = ["ImageInput", "InternVLFamily", "ModelFamily", "QwenVLFamily", "family_for", "registered_families"]


class QwenVLFamily(ModelFamily):
    """Qwen2-VL / Qwen2.5-VL: ``<|vision_start|>`` + one ``<|image_pad|>`` per merged patch +
    ``<|vision_end|>``; flattened patches with a (t, h, w) grid per image; M-RoPE positions that
    the model caches as ``rope_deltas`` between calls."""

    name = "qwen2-vl"
    model_types = ("qwen2_vl", "qwen2_5_vl")
    processor_classes = ("Qwen2VLProcessor", "Qwen2_5_VLProcessor")
    image_token = "<|image_pad|>"
    vision_control_tokens = ("<|vision_start|>", "<|vision_end|>")
    optional_forbidden_tokens = ("<|video_pad|>", "<|endoftext|>")

    def vision_span(self, count: int) -> str:
        return f"<|vision_start|>{self.image_token * count}<|vision_end|>"

    def image_inputs(self, processor: Any, images: Sequence[Image.Image]) -> list[ImageInput]:
        out = processor.image_processor(images=list(images), return_tensors="pt")
        grids = out["image_grid_thw"]
        sizes = [int(torch.prod(grid).item()) for grid in grids]
        chunks = torch.split(out["pixel_values"], sizes, dim=0)
        return [ImageInput(chunk.clone(), grid.clone()) for chunk, grid in zip(chunks, grids, strict=True)]

    def vision_tokens(self, processor: Any, image: ImageInput) -> int:
        """Patches / merge size squared."""
        assert image.grid_thw is not None, "a Qwen-VL image input has a grid"
        merge = int(getattr(getattr(processor, "image_processor", None), "merge_size", 2) or 2)
        return int(torch.prod(image.grid_thw).item()) // (merge * merge)

    def batch_inputs(self, images: Sequence[ImageInput], input_ids: torch.Tensor,
                     attention_mask: torch.Tensor, image_token_id: int) -> dict[str, torch.Tensor]:
        batch = {"mm_token_type_ids": (input_ids == image_token_id).long() * attention_mask}
        if images:
            grids = [image.grid_thw for image in images if image.grid_thw is not None]
            batch["pixel_values"] = torch.cat([image.pixel_values for image in images], dim=0)
            batch["image_grid_thw"] = torch.stack(grids, dim=0)
        return batch

    def row_position_ids(self, model: Any, seqs: Sequence[TokenRow], image_token_id: int) -> list[torch.Tensor]:
        """Each row's ``[3, len]`` M-RoPE positions as the model's own forward computes them
        (``get_rope_index``): what packed scoring gives its tokens (:mod:`~.packed_forward`).

        ``get_rope_index`` walks every token in Python, so it runs once per distinct row head (the
        tokens through the token after the last image, and the images): the G rows of a group share
        one.  Past the head only text follows, whose positions go up by one in all three axes."""
        heads: dict[tuple[Any, ...], int] = {}
        cuts, which = [], []
        for seq in seqs:
            spots = [i for i, token in enumerate(seq.input_ids) if token == image_token_id]
            cut = min(len(seq), spots[-1] + 2) if spots else 1
            key = (tuple(seq.input_ids[:cut]), tuple(image_key(image) for image in seq.images))
            which.append(heads.setdefault(key, len(heads)))
            cuts.append(cut)
        firsts = {index: row for row, index in reversed(list(enumerate(which)))}
        unique = [seqs[firsts[index]] for index in range(len(heads))]
        width = max(cuts[firsts[index]] for index in range(len(heads)))
        ids = torch.full((len(unique), width), 0, dtype=torch.long)
        attention = torch.zeros_like(ids)
        for row, seq in enumerate(unique):
            cut = cuts[firsts[row]]
            ids[row, :cut] = torch.tensor(seq.input_ids[:cut], dtype=torch.long)
            attention[row, :cut] = 1
        images = [image for seq in unique for image in seq.images]
        grids = torch.stack([image.grid_thw for image in images if image.grid_thw is not None]) if images else None
        inner = base_model(model).model
        positions, _ = inner.get_rope_index(ids, mm_token_type_ids=(ids == image_token_id).long() * attention,
                                            image_grid_thw=grids, attention_mask=attention)
        out = []
        for seq, cut, index in zip(seqs, cuts, which, strict=True):
            head = positions[:, index, :cut]
            tail = head[:, -1:] + torch.arange(1, len(seq) - cut + 1)
            out.append(torch.cat([head, tail], dim=1))
        return out

    def reset_generation_state(self, model: Any) -> None:
        inner = getattr(model, "model", None)
        for candidate in (model, inner, getattr(inner, "model", None)):
            if candidate is not None and hasattr(candidate, "rope_deltas"):
                candidate.rope_deltas = None


class InternVLFamily(ModelFamily):
    """InternVL (transformers-native ``InternVLForConditionalGeneration``): each image is one or
    more square tiles (``pixel_values`` of shape tiles x 3 x H x W), each tile
    ``image_seq_length`` ``<IMG_CONTEXT>`` tokens, the whole image between ``<img>`` and
    ``</img>``; plain 1-D positions, so nothing is cached between calls."""

    name = "internvl"
    model_types = ("internvl",)
    processor_classes = ("InternVLProcessor",)
    image_token = "<IMG_CONTEXT>"
    vision_control_tokens = ("<img>", "</img>")
    optional_forbidden_tokens = ("<video>", "<|endoftext|>")

    def vision_span(self, count: int) -> str:
        return f"<img>{self.image_token * count}</img>"

    def image_inputs(self, processor: Any, images: Sequence[Image.Image]) -> list[ImageInput]:
        out = processor.image_processor(images=list(images), return_tensors="pt")
        tiles = [int(n) for n in out.get("num_patches", [1] * len(images))]
        chunks = torch.split(out["pixel_values"], tiles, dim=0)
        return [ImageInput(chunk.clone()) for chunk in chunks]

    def vision_tokens(self, processor: Any, image: ImageInput) -> int:
        """Tiles x the processor's ``image_seq_length``."""
        return int(image.pixel_values.shape[0]) * int(processor.image_seq_length)

    def batch_inputs(self, images: Sequence[ImageInput], input_ids: torch.Tensor,
                     attention_mask: torch.Tensor, image_token_id: int) -> dict[str, torch.Tensor]:
        if not images:
            return {}
        return {"pixel_values": torch.cat([image.pixel_values for image in images], dim=0)}

    def row_position_ids(self, model: Any, seqs: Sequence[TokenRow], image_token_id: int) -> list[torch.Tensor]:
        """Each row's positions 0, 1, ... (InternVL's language model numbers the tokens plainly,
        images included), as its forward does for a right-padded row."""
        return [torch.arange(len(seq)) for seq in seqs]


def registered_families() -> list[ModelFamily]:
    """One instance of every family the plugins registered, in registration order."""
    from vista_rl import host

    registry = host().registry("families")
    return [host().make("families", spec.id) for spec in registry]


def family_for(processor: Any = None, model_type: str | None = None) -> ModelFamily:
    """The family of a checkpoint, by its ``config.model_type`` when known, else its processor."""
    family = registered_family(processor, model_type)
    if family is not None:
        return family
    families = registered_families()
    known = ", ".join(f"{f.name} ({', '.join(f.model_types)})" for f in families) or "none"
    what = f"model_type {model_type!r}" if model_type else f"processor {type(processor).__name__}"
    raise ConfigError(f"the local engine has no model family for {what}; known families: {known}. "
                      "A plugin adds one with the register_model_families hook (a vista_rl.ModelFamily).")
