"""Rendering vista chats into a Hugging Face processor's model inputs.

One public path from ``vista_rl.observation.Message`` lists to ``input_ids`` + ``pixel_values``, shared
by the transformers backend (and so ``vista serve``) and the vLLM backend (which needs the same
prompt text, so greedy outputs match token for token).

The layout is the training engines' own: when an installed plugin registers a
:class:`~vista_rl.model_family.ModelFamily` for the processor (the local engine registers Qwen2-VL,
Qwen2.5-VL and InternVL), the text is :func:`vista_rl.chat_render.chat_text`, the walk the local
engine's RL prompts and SFT data are tokenized by, so a served model reads the ids it was trained
on (no default system prompt; tool results in the family's tool role).  Each image is written as
the processor's chat template writes one image part, and the processor expands it as usual.  A
model no plugin has a family for is rendered by its own chat template.

Images follow the ``<image>`` placeholder convention of :class:`vista_rl.Observation`: each placeholder
becomes an ``{"type": "image"}`` content part where it stands, and the images are collected in the
same order, which is the order processors consume them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PIL import Image

from vista_rl import Chat, Message, Observation
from vista_rl.chat_render import chat_text, registered_family


def chat_to_hf_messages(chat: Sequence[Message]) -> list[dict[str, Any]]:
    """HF chat-template messages for ``chat``: string content for text-only messages, content parts
    (``{"type": "text"}`` / ``{"type": "image"}``, no pixel data) where a message has images."""
    messages: list[dict[str, Any]] = []
    for message in chat:
        if not message.images:
            messages.append({"role": message.role, "content": message.content})
            continue
        parts: list[dict[str, Any]] = []
        for segment in Observation(message.content, message.images).segments():
            if isinstance(segment, str):
                parts.append({"type": "text", "text": segment})
            else:
                parts.append({"type": "image"})
        messages.append({"role": message.role, "content": parts})
    return messages


_RGB_COPY = "_vista_rgb_copy"


def as_rgb(image: Image.Image) -> Image.Image:
    """``image`` itself when it is RGB, else its RGB conversion, made once and kept on the image: a
    multi-turn chat passes the same history images to the processor every turn, and keeping their
    identity lets the per-image caches (hash, processed features) find them again."""
    if image.mode == "RGB":
        return image
    converted = getattr(image, _RGB_COPY, None)
    if not isinstance(converted, Image.Image) or converted.size != image.size:
        converted = image.convert("RGB")
        setattr(image, _RGB_COPY, converted)
    return converted


def chat_images(chat: Sequence[Message]) -> list[Image.Image]:
    """The chat's images in placeholder order, as RGB (see :func:`as_rgb`)."""
    return [as_rgb(image) for message in chat for image in message.images]


def _template_owner(processor: Any) -> Any:
    owner = processor if getattr(processor, "chat_template", None) else getattr(processor, "tokenizer", processor)
    if not getattr(owner, "chat_template", None):
        raise ValueError("the processor and its tokenizer have no chat_template; set one to render chats")
    return owner


_IMAGE_TEXT = "_vista_image_text"


def template_image_text(processor: Any) -> str | None:
    """What the processor's chat template writes for one image part (Qwen-VL:
    ``<|vision_start|><|image_pad|><|vision_end|>``), the text its processor expands into the
    image's tokens; ``None`` when the template shows none.  Found once per processor by rendering
    an image part between two marker texts and keeping what lies between them."""
    if hasattr(processor, _IMAGE_TEXT):
        found: str | None = getattr(processor, _IMAGE_TEXT)
        return found
    before, after = "[[vista-before-image]]", "[[vista-after-image]]"
    content = [{"type": "text", "text": before}, {"type": "image"}, {"type": "text", "text": after}]
    text = str(_template_owner(processor).apply_chat_template([{"role": "user", "content": content}], tokenize=False))
    start, end = text.find(before), text.find(after)
    found = (text[start + len(before):end] or None) if 0 <= start < end else None
    setattr(processor, _IMAGE_TEXT, found)
    return found


def render_chat_text(processor: Any, chat: Sequence[Message], add_generation_prompt: bool = True) -> str:
    """The prompt string the model sees (image placeholders expanded later by the processor): the
    registered family's layout when there is one (see the module docstring), else the chat template
    of the processor (or of its tokenizer when the processor has none)."""
    family = registered_family(processor=processor)
    if family is not None:
        has_images = any(message.images for message in chat)
        image_text = template_image_text(processor) if has_images else None
        if image_text is not None or not has_images:
            return chat_text(family, chat, add_generation_prompt=add_generation_prompt, image_text=image_text)
    owner = _template_owner(processor)
    text = owner.apply_chat_template(chat_to_hf_messages(chat), tokenize=False,
                                     add_generation_prompt=add_generation_prompt)
    return str(text)


def encode_chats(
    processor: Any,
    chats: Sequence[Chat],
    *,
    add_generation_prompt: bool = True,
    padding_side: str = "left",
    return_tensors: str = "pt",
) -> Any:
    """Processor inputs for a batch of chats: ``input_ids``, ``attention_mask`` (padded on
    ``padding_side``; left for generation) and, when any chat has images, the vision tensors
    (``pixel_values``, ``image_grid_thw`` for Qwen-VL models).  Returns the processor's
    ``BatchFeature``; move it with ``.to(device)``."""
    texts = [render_chat_text(processor, chat, add_generation_prompt) for chat in chats]
    images = [image for chat in chats for image in chat_images(chat)]
    tokenizer = getattr(processor, "tokenizer", processor)
    previous_side = getattr(tokenizer, "padding_side", None)
    tokenizer.padding_side = padding_side
    try:
        kwargs: dict[str, Any] = {"text": texts, "padding": True, "return_tensors": return_tensors}
        if images:
            kwargs["images"] = images
        return processor(**kwargs)
    finally:
        if previous_side is not None:
            tokenizer.padding_side = previous_side


def vision_inputs(processor: Any, images: Sequence[Image.Image], return_tensors: str = "pt") -> dict[str, Any]:
    """Only the vision tensors for ``images`` (e.g. ``pixel_values`` and ``image_grid_thw``): for a
    trainer that already holds token ids (prompt + response) and needs the pixels they refer to."""
    if not images:
        return {}
    features = processor.image_processor(images=[image.convert("RGB") for image in images],
                                         return_tensors=return_tensors)
    return dict(features)
