"""Prompts tokenised a message at a time, through :class:`vista_rl.chat_render.IncrementalRenderer`.

Why: the backend used to render each chat to one string and hand it to the processor, which
tokenised the whole history and expanded every image's tokens again on every turn; at batch 64
that was most of the framework's time per env-turn (issue 36).  Here each message is tokenised once
(the renderer keeps its ids while the message lives), each image goes through the processor once
(its span ids and tensors; the processed pixels come from the image cache), and a turn's prompt is
the old pieces plus the new ones.

The ids and tensors must be the ones the processor gives for the whole chat (:func:`encode_chats`).
Whether pieces join into the whole-text tokenisation is a property of the tokenizer, so the backend
checks it (:meth:`PromptEncoder.same_as`) on its first calls with and without images and keeps
encoding whole chats if they differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image

from vista_plugin_transformers.chat import as_rgb, template_image_text
from vista_rl import Message
from vista_rl.chat_render import IncrementalRenderer, RenderedIds, registered_family
from vista_rl.store import image_hash

#: Per-token outputs of a processor; every other output of a one-image call is per image.
TOKEN_KEYS = ("input_ids", "attention_mask", "mm_token_type_ids", "token_type_ids")


@dataclass
class EncodedImage:
    """One image as the processor encodes it: its content hash (which image it is, for a KV cache
    deciding whether a cached span shows the same picture) and its per-image tensors
    (``pixel_values``, ``image_grid_thw`` for Qwen-VL; ``pixel_values`` tiles for InternVL)."""

    key: str
    tensors: dict[str, Any]


class PromptEncoder:
    """Token ids of chats for one processor, a message at a time (see the module docstring)."""

    def __init__(self, processor: Any, renderer: IncrementalRenderer[EncodedImage], image_text: str) -> None:
        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.renderer = renderer
        self.image_text = image_text
        self.token_type_ids = False  # whether the processor returns mm_token_type_ids (Qwen-VL)

    @classmethod
    def for_processor(cls, processor: Any) -> PromptEncoder | None:
        """An encoder when an installed plugin registers the processor's family and its chat
        template shows an image part, else ``None`` (the backend then encodes whole chats)."""
        family = registered_family(processor=processor)
        image_text = template_image_text(processor) if family is not None else None
        if family is None or image_text is None:
            return None
        encoder: PromptEncoder
        renderer: IncrementalRenderer[EncodedImage] = IncrementalRenderer(
            family, lambda text: encoder.text_ids(text), lambda image: encoder.image_ids(image))
        encoder = cls(processor, renderer, image_text)
        return encoder

    def text_ids(self, text: str) -> list[int]:
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def image_ids(self, image: Image.Image) -> tuple[list[int], EncodedImage]:
        """The processor's expansion of one image part and its tensors."""
        rgb = as_rgb(image)
        out = self.processor(text=[self.image_text], images=[rgb], return_tensors="pt")
        self.token_type_ids = self.token_type_ids or "mm_token_type_ids" in out
        tensors = {key: value for key, value in out.items() if key not in TOKEN_KEYS}
        return [int(i) for i in out["input_ids"][0].tolist()], EncodedImage(image_hash(rgb), tensors)

    def render(self, chat: Sequence[Message]) -> RenderedIds[EncodedImage]:
        return self.renderer.render(chat)

    def collate(self, prompts: Sequence[RenderedIds[EncodedImage]]) -> Any:
        """A left-padded batch as ``encode_chats`` returns it: ``input_ids``, ``attention_mask``,
        ``mm_token_type_ids`` where the processor makes them, and every image's tensors in order."""
        import torch
        from transformers import BatchFeature

        width = max(len(prompt.ids) for prompt in prompts)
        pad = self.tokenizer.pad_token_id
        pad = int(pad) if pad is not None else 0
        ids = torch.full((len(prompts), width), pad, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt.ids):] = torch.tensor(prompt.ids, dtype=torch.long)
            attention[row, width - len(prompt.ids):] = 1
        data: dict[str, Any] = {"input_ids": ids, "attention_mask": attention}
        if self.token_type_ids:
            data["mm_token_type_ids"] = torch.tensor(self.processor.create_mm_token_type_ids(ids.tolist()),
                                                     dtype=torch.long)
        data.update(image_tensors([image for prompt in prompts for image in prompt.images]))
        return BatchFeature(data=data)

    @staticmethod
    def same_as(ours: Any, reference: Any) -> bool:
        """Whether a collated batch equals the processor's own encoding of the same chats."""
        import torch

        theirs = dict(reference)
        mine = dict(ours)
        if set(theirs) != set(mine):
            return False
        return all(isinstance(value, torch.Tensor) and value.shape == mine[key].shape
                   and torch.equal(value, mine[key]) for key, value in theirs.items())


def image_tensors(images: Sequence[EncodedImage]) -> dict[str, Any]:
    """The images' tensors concatenated per key (the processor's batch layout for these images)."""
    import torch

    if not images:
        return {}
    keys = list(images[0].tensors)
    return {key: torch.cat([image.tensors[key] for image in images], dim=0) for key in keys}
