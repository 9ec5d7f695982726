"""The one chat layout: how a vista chat becomes the text pieces a model family reads.

Why one place: the local engine's RL rollout (``vista_plugin_local.policy_backend``), its SFT data
(``vista_plugin_local.sft_data``) and ``vista serve`` (``vista_plugin_transformers.chat``) must show
the model the same tokens for the same conversation, or a model trained with one path is served or
scored with another.  Each of them walks :func:`chat_segments`; what differs is only how a piece
becomes ids (the local engine keeps the ids it sampled for assistant replies and expands images
itself; the server lets the processor tokenize the joined text).

The layout comes from the :class:`~vista_rl.model_family.ModelFamily` a plugin registered for the
checkpoint (``register_model_families``).  Torch-free, like the rest of the core.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vista_rl.model_family import ModelFamily
from vista_rl.observation import IMAGE_PLACEHOLDER, Message

__all__ = ["Segment", "chat_segments", "chat_text", "registered_family"]

SegmentKind = Literal["message", "header", "reply", "separator"]


@dataclass(frozen=True)
class Segment:
    """One piece of a rendered chat.

    ``message``: a whole non-assistant message (``text`` still holds its ``<image>`` placeholders);
    ``header``: the generation prompt (before each assistant reply, and at the end);
    ``reply``: an assistant message's content closed by the family's end token;
    ``separator``: what follows a reply before the next message (none after a closing reply).
    ``index`` is the message's position in the chat (``None`` for the final generation prompt)."""

    kind: SegmentKind
    text: str
    index: int | None = None


def chat_segments(family: ModelFamily, chat: Sequence[Message], *,
                  add_generation_prompt: bool = True) -> list[Segment]:
    """The chat as the family lays it out, piece by piece (tool results in the family's
    ``tool_role``; no default system prompt is added: the model sees the system prompt it is given)."""
    segments: list[Segment] = []
    for index, message in enumerate(chat):
        if message.role == "assistant":
            segments.append(Segment("header", family.assistant_header, index))
            segments.append(Segment("reply", f"{message.content}{family.end_token}", index))
            if index + 1 < len(chat) or add_generation_prompt:  # a closing reply ends at its end token
                segments.append(Segment("separator", family.message_separator, index))
        else:
            segments.append(Segment("message", family.message_text(message.role, message.content), index))
    if add_generation_prompt:
        segments.append(Segment("header", family.assistant_header))
    return segments


def chat_text(family: ModelFamily, chat: Sequence[Message], *, add_generation_prompt: bool = True,
              image_text: str | Callable[[int], str] | None = None) -> str:
    """The whole chat as one string.  ``image_text`` replaces the ``<image>`` placeholders in order
    (a string for every image, or a function of the image's index); ``None`` keeps them."""
    text = "".join(segment.text for segment in chat_segments(family, chat, add_generation_prompt=add_generation_prompt))
    if image_text is None:
        return text
    pieces = text.split(IMAGE_PLACEHOLDER)
    spans = [image_text(index) if callable(image_text) else image_text for index in range(len(pieces) - 1)]
    return pieces[0] + "".join(span + piece for span, piece in zip(spans, pieces[1:], strict=True))


def registered_family(processor: Any = None, model_type: str | None = None) -> ModelFamily | None:
    """The registered family of a checkpoint (by ``config.model_type`` when given, else by its
    processor's class), or ``None`` when no installed plugin registers one."""
    from vista_rl import host

    registry = host().registry("families")
    families = [host().make("families", spec.id) for spec in registry]
    for family in families:
        if model_type is not None and family.matches(model_type=model_type):
            return family
    for family in families:
        if processor is not None and family.matches(processor=processor):
            return family
    return None
