"""Token view of a multi-turn chat with interleaved images, built segment by segment.

Why segment by segment: the assistant tokens the policy sampled must stay exactly the tokens it is
trained on (re-tokenising decoded text can split words differently), and the loss mask must cover
only those tokens.  So a conversation is: a prompt segment (system + first observation + assistant
header), then per turn the sampled assistant ids, then the next observation segment.  Prompt
segments go through the model's processor, which expands each image into its vision tokens.

The layout (chat tokens, how an image becomes tokens, the image tensors) comes from the model's
:class:`~vista_rl.model_family.ModelFamily` (Qwen2.5-VL, InternVL, or one a plugin registers), and
the walk over a chat is :func:`vista_rl.chat_render.chat_segments`, the one that ``vista serve``
renders with too (:meth:`ChatEncoder.render`), so RL, SFT and serving show the model the same ids.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PIL import Image

from vista_plugin_local.families import family_for
from vista_plugin_local.image_input import ImageInput
from vista_rl import IMAGE_PLACEHOLDER, Message
from vista_rl.chat_render import chat_segments

if TYPE_CHECKING:
    from vista_rl import ModelFamily

__all__ = ["VISION_SPAN", "ChatEncoder", "EpisodeTokens", "ImageInput"]

#: Qwen2-VL's image span with one pad token (kept for callers; families own the layout now).
VISION_SPAN = "<|vision_start|><|image_pad|><|vision_end|>"


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

    def __init__(self, processor: Any, image_size: int | None = None, family: ModelFamily | None = None) -> None:
        if family is None:
            family = family_for(processor)
        self.family = family
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.image_size = image_size
        self.im_end_id = self._token_id(family.end_token)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.im_end_id
        self.image_token_id = self._token_id(family.image_token)
        #: Tokens the policy may never sample: a sampled vision or chat-control token would corrupt
        #: the conversation (an image token without an image breaks the next forward pass).
        required = {self._token_id(token) for token in family.required_tokens} - {self.im_end_id}
        self.forbidden_ids = sorted(required | {self.pad_id} - {self.im_end_id}
                                    | self._optional_ids(*family.optional_forbidden_tokens))

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
            raise ValueError(f"the tokenizer has no {token} token; the local engine's {self.family.name} layout "
                             f"needs {', '.join(self.family.required_tokens)}")
        return int(token_id)

    # ----------------------------------------------------------------- segments
    # A conversation is the concatenation of message segments, each ``<|im_start|>role\n...<|im_end|>\n``,
    # then the generation header.  Every boundary sits at a special token, so encoding the pieces
    # one by one gives the same ids as encoding the whole text at once: a prompt of turn k+1 starts
    # with the prompt of turn k plus the sampled ids, token for token.
    def message_segment(self, role: str, content: str, images: list[Image.Image],
                        vision: list[ImageInput] | None = None) -> tuple[list[int], list[ImageInput]]:
        """One message (tool results are shown as the family's ``tool_role``, a user message in
        the Qwen2-VL template)."""
        return self.encode(self.family.message_text(role, content), images, vision)

    @functools.cached_property
    def assistant_header(self) -> list[int]:
        """The generation prompt ``<|im_start|>assistant\n``."""
        return self.encode(self.family.assistant_header, [])[0]

    @functools.cached_property
    def message_end(self) -> list[int]:
        """What follows an assistant turn's ``<|im_end|>`` before the next message."""
        return self.encode(self.family.message_separator, [])[0]

    def render(self, chat: Sequence[Message], *, add_generation_prompt: bool = True,
               message_ids: Callable[[Message], tuple[list[int], list[ImageInput]]] | None = None,
               reply_ids: Callable[[int], list[int]] | None = None,
               trainable: Callable[[int], bool] | None = None) -> EpisodeTokens:
        """Token view of ``chat`` in :func:`~vista_rl.chat_render.chat_segments`' layout.

        ``message_ids(message)``: a non-assistant message's ids and image tensors (default: encode
        it); ``reply_ids(index)``: the ids of the assistant message at ``index`` ending with the end
        token (default: its text tokenized, as :meth:`response_ids`); ``trainable(index)``: whether
        that reply is in the loss (default: none).  Each reply's last position is a turn end."""
        tokens = EpisodeTokens()
        for segment in chat_segments(self.family, chat, add_generation_prompt=add_generation_prompt):
            if segment.kind == "header":
                tokens.extend(self.assistant_header, trainable=False)
            elif segment.kind == "separator":
                tokens.extend(self.message_end, trainable=False)
            elif segment.kind == "message":
                assert segment.index is not None
                message = chat[segment.index]
                ids, vision = (message_ids(message) if message_ids is not None
                               else self.encode(segment.text, list(message.images)))
                tokens.extend(ids, trainable=False)
                tokens.images.extend(vision)
            else:
                assert segment.index is not None
                ids = (reply_ids(segment.index) if reply_ids is not None
                       else self.response_ids(chat[segment.index].content))
                tokens.extend(ids, trainable=trainable is not None and trainable(segment.index))
                tokens.turn_ends.append(len(tokens) - 1)
        return tokens

    def prompt_segment(self, system: str, observation: str, images: list[Image.Image]) -> tuple[list[int], list[ImageInput]]:
        """An episode's first prompt (system, observation, generation header), by :meth:`render`."""
        chat = [Message("system", system)] if system else []
        tokens = self.render([*chat, Message("user", observation, list(images))])
        return tokens.input_ids, tokens.images

    def response_ids(self, text: str) -> list[int]:
        """Ids of a written response (SFT), closed by ``<|im_end|>`` so the model learns to stop."""
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)] + [self.im_end_id]

    def encode(self, text: str, images: list[Image.Image],
               vision: list[ImageInput] | None = None) -> tuple[list[int], list[ImageInput]]:
        """Ids of ``text`` with each ``<image>`` expanded to its vision tokens, and the images'
        tensors (``vision`` when the caller already has them, e.g. the same image in G samples).

        The expansion is what the family's processor does (Qwen2-VL: ``<|vision_start|>``, one
        ``<|image_pad|>`` per merged patch, ``<|vision_end|>``), done here so that the image
        processor runs once per image and the text costs one tokenizer call."""
        if text.count(IMAGE_PLACEHOLDER) != len(images):
            raise ValueError(f"{text.count(IMAGE_PLACEHOLDER)} {IMAGE_PLACEHOLDER} placeholders but {len(images)} images")
        if not images:
            return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)], []
        vision = list(vision) if vision is not None else self.image_inputs(images)
        pieces = text.split(IMAGE_PLACEHOLDER)
        counts = [self.vision_tokens(image) for image in vision]
        expanded = pieces[0] + "".join(
            f"{self.family.vision_span(count)}{piece}"
            for count, piece in zip(counts, pieces[1:], strict=True))
        ids = [int(i) for i in self.tokenizer.encode(expanded, add_special_tokens=False)]
        if ids.count(self.image_token_id) != sum(counts):
            raise ValueError(f"the text holds {self.family.image_token} tokens of its own; they would be taken "
                             "for image slots")
        return ids, vision

    def image_inputs(self, images: list[Image.Image]) -> list[ImageInput]:
        """Each image's tensors from the family's image processor (resized first if configured)."""
        prepared = [self.prepare_image(image) for image in images]
        inputs: list[ImageInput] = self.family.image_inputs(self.processor, prepared)
        return inputs

    def prepare_image(self, image: Image.Image) -> Image.Image:
        image = image.convert("RGB")
        if self.image_size is not None and image.size != (self.image_size, self.image_size):
            image = image.resize((self.image_size, self.image_size), Image.Resampling.BOX)
        return image

    def vision_tokens(self, image: ImageInput) -> int:
        """How many image tokens ``image`` expands to (Qwen-VL: patches / merge size squared)."""
        return int(self.family.vision_tokens(self.processor, image))

    def decode(self, ids: list[int]) -> str:
        """Response text: special tokens the env must see (``<answer>`` may be one) are kept; chat
        control tokens are dropped."""
        ids = [i for i in ids if i not in (self.im_end_id, self.pad_id)]
        text: str = self.tokenizer.decode(ids, skip_special_tokens=False)
        for control in self.family.control_tokens:
            text = text.replace(control, "")
        return text
