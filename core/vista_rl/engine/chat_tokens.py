"""Token view of a multi-turn chat with interleaved images, built segment by segment.

Why segment by segment: the assistant tokens the policy sampled must stay exactly the tokens it is
trained on (re-tokenising decoded text can split words differently), and the loss mask must cover
only those tokens.  So a conversation is: a prompt segment (system + first observation + assistant
header), then per turn the sampled assistant ids, then the next observation segment.  Prompt
segments go through the model's processor, which expands each image into its vision tokens.

The layout follows the Qwen2-VL / Qwen2.5-VL chat template (``<|im_start|>role ... <|im_end|>``),
the family the tiny-model factory builds and the engine targets.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch
from PIL import Image

from vista_rl.observation import IMAGE_PLACEHOLDER

VISION_SPAN = "<|vision_start|><|image_pad|><|vision_end|>"


@dataclass
class ImageInput:
    """One image as the vision tower takes it: flattened patches and its (t, h, w) grid."""

    pixel_values: torch.Tensor
    grid_thw: torch.Tensor


@dataclass
class EpisodeTokens:
    """Token ids of a conversation so far, the assistant loss mask and the images in order."""

    input_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    images: list[ImageInput] = field(default_factory=list)

    def extend(self, ids: list[int], trainable: bool) -> None:
        self.input_ids.extend(ids)
        self.loss_mask.extend([1 if trainable else 0] * len(ids))

    def __len__(self) -> int:
        return len(self.input_ids)


class ChatEncoder:
    """Turns system prompts, observations and responses into token segments for one processor."""

    def __init__(self, processor: Any, image_size: int | None = None) -> None:
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.image_size = image_size
        self.im_end_id = self._token_id("<|im_end|>")
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.im_end_id
        self.image_token_id = self._token_id("<|image_pad|>")
        #: Tokens the policy may never sample: a sampled vision or chat-control token would corrupt
        #: the conversation (an ``<|image_pad|>`` without an image breaks the next forward pass).
        self.forbidden_ids = sorted({
            self._token_id(token) for token in ("<|image_pad|>", "<|vision_start|>", "<|vision_end|>", "<|im_start|>")
        } | {self.pad_id} - {self.im_end_id} | self._optional_ids("<|video_pad|>", "<|endoftext|>"))

    def _optional_ids(self, *tokens: str) -> set[int]:
        found = set()
        for token in tokens:
            token_id = self.tokenizer.convert_tokens_to_ids(token)
            if token_id is not None and token_id != self.tokenizer.unk_token_id and token_id != self.im_end_id:
                found.add(int(token_id))
        return found

    def _token_id(self, token: str) -> int:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise ValueError(f"the tokenizer has no {token} token; the local engine needs a Qwen2-VL-style chat "
                             "vocabulary (<|im_start|>, <|im_end|>, <|vision_start|>, <|image_pad|>)")
        return int(token_id)

    # ----------------------------------------------------------------- segments
    # A conversation is the concatenation of message segments, each ``<|im_start|>role\n...<|im_end|>\n``,
    # then the generation header.  Every boundary sits at a special token, so encoding the pieces
    # one by one gives the same ids as encoding the whole text at once: a prompt of turn k+1 starts
    # with the prompt of turn k plus the sampled ids, token for token.
    def message_segment(self, role: str, content: str, images: list[Image.Image]) -> tuple[list[int], list[ImageInput]]:
        """One message (tool results are shown as a user message, as the Qwen2-VL template does)."""
        role = "user" if role == "tool" else role
        return self.encode(f"<|im_start|>{role}\n{content}<|im_end|>\n", images)

    @functools.cached_property
    def assistant_header(self) -> list[int]:
        """The generation prompt ``<|im_start|>assistant\n``."""
        return self.encode("<|im_start|>assistant\n", [])[0]

    @functools.cached_property
    def message_end(self) -> list[int]:
        """What follows an assistant turn's ``<|im_end|>`` before the next message."""
        return self.encode("\n", [])[0]

    def prompt_segment(self, system: str, observation: str, images: list[Image.Image]) -> tuple[list[int], list[ImageInput]]:
        ids: list[int] = []
        if system:
            ids += self.message_segment("system", system, [])[0]
        user, vision = self.message_segment("user", observation, images)
        return ids + user + self.assistant_header, vision

    def followup_segment(self, observation: str, images: list[Image.Image], role: str = "user") -> tuple[list[int], list[ImageInput]]:
        """What follows an assistant turn's ``<|im_end|>``: the next observation and the header."""
        ids, vision = self.message_segment(role, observation, images)
        return self.message_end + ids + self.assistant_header, vision

    def response_ids(self, text: str) -> list[int]:
        """Ids of a written response (SFT), closed by ``<|im_end|>`` so the model learns to stop."""
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)] + [self.im_end_id]

    def encode(self, text: str, images: list[Image.Image]) -> tuple[list[int], list[ImageInput]]:
        if text.count(IMAGE_PLACEHOLDER) != len(images):
            raise ValueError(f"{text.count(IMAGE_PLACEHOLDER)} {IMAGE_PLACEHOLDER} placeholders but {len(images)} images")
        text = text.replace(IMAGE_PLACEHOLDER, VISION_SPAN)
        if not images:
            return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)], []
        prepared = [self.prepare_image(image) for image in images]
        out = self.processor(text=[text], images=prepared, return_tensors="pt")
        ids = [int(i) for i in out["input_ids"][0].tolist()]
        grids = out["image_grid_thw"]
        sizes = [int(torch.prod(grid).item()) for grid in grids]
        chunks = torch.split(out["pixel_values"], sizes, dim=0)
        return ids, [ImageInput(chunk.clone(), grid.clone()) for chunk, grid in zip(chunks, grids, strict=True)]

    def prepare_image(self, image: Image.Image) -> Image.Image:
        image = image.convert("RGB")
        if self.image_size is not None and image.size != (self.image_size, self.image_size):
            image = image.resize((self.image_size, self.image_size), Image.Resampling.BOX)
        return image

    def vision_tokens(self, image: ImageInput) -> int:
        """How many ``<|image_pad|>`` tokens ``image`` expands to (patches / merge size squared)."""
        merge = int(getattr(getattr(self.processor, "image_processor", None), "merge_size", 2) or 2)
        return int(torch.prod(image.grid_thw).item()) // (merge * merge)

    def decode(self, ids: list[int]) -> str:
        """Response text: special tokens the env must see (``<answer>`` may be one) are kept; chat
        control tokens are dropped."""
        ids = [i for i in ids if i not in (self.im_end_id, self.pad_id)]
        text: str = self.tokenizer.decode(ids, skip_special_tokens=False)
        for control in ("<|im_end|>", "<|endoftext|>", "<|im_start|>"):
            text = text.replace(control, "")
        return text
