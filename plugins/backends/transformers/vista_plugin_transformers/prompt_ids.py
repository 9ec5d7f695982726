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

from collections.abc import Mapping, Sequence
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
        #: an image's span ids by the signature of its processed tensors (see :meth:`image_ids`)
        self._spans: dict[tuple[Any, ...], list[int]] = {}
        #: whether the image processor alone gives the processor's tensors (None: not checked yet)
        self._kept: tuple[str, ...] = ()  # the image processor's outputs the processor returns
        self._direct: bool | None = None if getattr(processor, "image_processor", None) is not None else False

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
        """``tokenizer(text, add_special_tokens=False)["input_ids"]``.  With a Rust (``tokenizers``)
        backend and no padding or truncation set on it, its ``encode`` is called directly: the
        Python wrapper around it cost more than the encoding itself on a turn's short texts."""
        fast = _plain_rust_tokenizer(self.tokenizer)
        if fast is not None:
            return list(fast.encode(text, add_special_tokens=False).ids)
        return [int(i) for i in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def image_ids(self, image: Image.Image) -> tuple[list[int], EncodedImage]:
        """The processor's expansion of one image part and its tensors.

        Why not always the processor: its text half (tokenising the image part, expanding the
        placeholder, the token-type ids) cost more than the image processor itself, on every new
        image, and it is the same for every image whose processed tensors have the same shapes and
        grid (Qwen-VL's ``image_grid_thw``, InternVL's tile count).  So the image processor runs
        alone and the span ids come from the first image with the same :func:`span_signature`,
        which went through the whole processor.  That first call also checks that the image
        processor alone gives the processor's tensors (those it keeps); if not, every image goes
        through the processor."""
        rgb = as_rgb(image)
        key = image_hash(rgb)
        direct: dict[str, Any] | None = None
        signature: tuple[Any, ...] | None = None
        if self._direct is not False:
            direct = dict(self.processor.image_processor([rgb], return_tensors="pt"))
            signature = span_signature(direct)
            known = self._spans.get(signature) if signature is not None and self._direct else None
            if known is not None:
                return list(known), EncodedImage(key, {name: direct[name] for name in self._kept})
        out = self.processor(text=[self.image_text], images=[rgb], return_tensors="pt")
        self.token_type_ids = self.token_type_ids or "mm_token_type_ids" in out
        tensors = {name: value for name, value in out.items() if name not in TOKEN_KEYS}
        ids = [int(i) for i in out["input_ids"][0].tolist()]
        if direct is not None:  # the outputs the processor keeps (InternVL drops num_patches)
            self._kept = tuple(tensors)
            self._direct = set(tensors) <= set(direct) and self.same_as(tensors, {name: direct[name] for name in tensors})
            if self._direct and signature is not None:
                self._spans[signature] = list(ids)
        return ids, EncodedImage(key, tensors)

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


def span_signature(tensors: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What an image part's expansion into tokens depends on, from its processed tensors: every
    tensor's shape and dtype, and the values of the small integer ones (grids, tile counts, sizes);
    float pixels only by their shape.  ``None`` when an output is not a tensor (no reuse then)."""
    import torch

    parts: list[Any] = []
    for name in sorted(tensors):
        value = tensors[name]
        if not isinstance(value, torch.Tensor):
            return None
        small_int = not value.is_floating_point() and not value.is_complex() and value.numel() <= 64
        parts.append((name, tuple(value.shape), str(value.dtype), tuple(value.flatten().tolist()) if small_int else None))
    return tuple(parts)


def _plain_rust_tokenizer(tokenizer: Any) -> Any:
    """The ``tokenizers.Tokenizer`` under a fast tokenizer when encoding with it alone gives what
    the tokenizer's ``__call__`` gives for one text: no truncation or fixed-length padding set on it,
    and special tokens split (or not) as the tokenizer says; else ``None``."""
    fast = getattr(tokenizer, "_tokenizer", None)
    if fast is None or not callable(getattr(fast, "encode", None)):
        return None
    try:
        padding = fast.padding
        if fast.truncation is not None or (padding is not None and (padding.get("length") is not None
                                                                     or padding.get("pad_to_multiple_of"))):
            return None
        if bool(fast.encode_special_tokens) != bool(getattr(tokenizer, "split_special_tokens", False)):
            return None
    except AttributeError:  # not the tokenizers library's Tokenizer
        return None
    return fast
