"""The one chat layout: how a vista chat becomes the text pieces a model family reads.

Why one place: the local engine's RL rollout (``vista_plugin_local.policy_backend``), its SFT data
(``vista_plugin_local.sft_data``) and ``vista serve`` (``vista_plugin_transformers.chat``) must show
the model the same tokens for the same conversation, or a model trained with one path is served or
scored with another.  Each of them walks :func:`chat_segments`; what differs is only how a piece
becomes ids (the local engine keeps the ids it sampled for assistant replies and expands images
itself; the server lets the processor tokenize the joined text).

The layout comes from the :class:`~vista_rl.model_family.ModelFamily` a plugin registered for the
checkpoint (``register_model_families``).  Torch-free, like the rest of the core.

:class:`IncrementalRenderer` walks the same segments but tokenises each message once for as long as
it lives, so a multi-turn backend renders and tokenises only a turn's new messages (issue 36).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from PIL import Image

from vista_rl.model_family import ModelFamily
from vista_rl.observation import IMAGE_PLACEHOLDER, Message

__all__ = ["IncrementalRenderer", "RenderedIds", "Segment", "chat_segments", "chat_text", "registered_family"]

#: What an encoder makes of one image (the transformers backend: the processor's tensors for it).
ImageT = TypeVar("ImageT")

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


@dataclass
class RenderedIds(Generic[ImageT]):
    """A chat's token ids in :func:`chat_segments`' layout and what the encoder made of each of its
    images, in placeholder order."""

    ids: list[int]
    images: list[ImageT]


@dataclass
class _Piece(Generic[ImageT]):
    owner: weakref.ref[Message]
    content: str
    ids: list[int]
    images: list[ImageT]


class IncrementalRenderer(Generic[ImageT]):
    """Token ids of chats in :func:`chat_segments`' layout, each message rendered and tokenised once.

    Why: a multi-turn prompt at turn k is turn k-1's prompt plus a reply and a few messages, and
    rendering and tokenising the whole history again every turn made a turn's framework cost grow
    with the episode (issue 36).  The rollout engine hands the backend the same ``Message`` objects
    turn after turn, so each message's ids are kept for as long as the message object lives (a
    weak reference drops them with it) and text-only messages also by role and content (a system
    prompt many episodes share), at most ``text_cache_size`` of them.

    ``text_ids(text)`` tokenises plain text; ``image_ids(image)`` gives one image's ids as the
    processor expands it (the family's vision span) and the encoder's data for it.  A message
    becomes its text pieces and image spans in order; an assistant message is tokenised with its
    header (``<|im_start|>assistant\\n`` + reply + end token), the separator after it on its own.

    Exactness: the pieces joined equal a whole-text tokenisation when every piece boundary sits at
    a token the tokenizer never merges across (ChatML's ``<|im_start|>``/``<|im_end|>`` and the
    vision delimiters of Qwen-VL and InternVL are added tokens).  That is a property of the
    tokenizer, so a caller checks it for its own (the transformers backend compares its first render
    with the processor's), and tests check it per family.  Thread-safe.
    """

    def __init__(self, family: ModelFamily, text_ids: Callable[[str], list[int]],
                 image_ids: Callable[[Image.Image], tuple[list[int], ImageT]], *,
                 text_cache_size: int = 4096) -> None:
        self.family = family
        self._text_ids = text_ids
        self._image_ids = image_ids
        self._text_cache_size = text_cache_size
        self._pieces: dict[int, _Piece[ImageT]] = {}
        self._texts: OrderedDict[tuple[str, str], list[int]] = OrderedDict()
        self._fixed: dict[str, list[int]] = {}
        self._lock = threading.Lock()
        #: pieces encoded (misses) and found again (hits), for benchmarks and tests
        self.encoded = 0
        self.reused = 0

    def render(self, chat: Sequence[Message], *, add_generation_prompt: bool = True) -> RenderedIds[ImageT]:
        """The ids of ``chat`` (see the class docstring): only messages not seen before are tokenised."""
        ids: list[int] = []
        images: list[ImageT] = []
        for segment in chat_segments(self.family, chat, add_generation_prompt=add_generation_prompt):
            if segment.kind == "header":
                if segment.index is None:  # the generation prompt; a reply's header goes with the reply
                    ids.extend(self._fixed_ids(segment.text))
            elif segment.kind == "separator":
                ids.extend(self._fixed_ids(segment.text))
            else:
                assert segment.index is not None
                piece = self._piece(chat[segment.index], segment)
                ids.extend(piece.ids)
                images.extend(piece.images)
        return RenderedIds(ids, images)

    def _fixed_ids(self, text: str) -> list[int]:
        found = self._fixed.get(text)
        if found is None:
            found = self._fixed[text] = list(self._text_ids(text))
        return found

    def _piece(self, message: Message, segment: Segment) -> _Piece[ImageT]:
        key = id(message)
        with self._lock:
            piece = self._pieces.get(key)
        if piece is not None and piece.owner() is message and piece.content == message.content \
                and len(piece.images) == len(message.images):
            self.reused += 1
            return piece
        text = self.family.assistant_header + segment.text if segment.kind == "reply" else segment.text
        ids, images = self._encode(message.role, text, message.images)
        self.encoded += 1
        owner = weakref.ref(message, functools.partial(self._forget, key))
        piece = _Piece(owner, message.content, ids, images)
        with self._lock:
            self._pieces[key] = piece
        return piece

    def _forget(self, key: int, ref: weakref.ref[Message]) -> None:
        with self._lock:
            piece = self._pieces.get(key)
            if piece is not None and piece.owner is ref:
                del self._pieces[key]

    def _encode(self, role: str, text: str, images: Sequence[Image.Image]) -> tuple[list[int], list[ImageT]]:
        if not images:
            return self._text_only(role, text), []
        pieces = text.split(IMAGE_PLACEHOLDER)
        ids = list(self._text_ids(pieces[0])) if pieces[0] else []
        encoded: list[ImageT] = []
        for image, after in zip(images, pieces[1:], strict=True):
            span, data = self._image_ids(image)
            ids.extend(span)
            encoded.append(data)
            if after:
                ids.extend(self._text_ids(after))
        return ids, encoded

    def _text_only(self, role: str, text: str) -> list[int]:
        key = (role, text)
        with self._lock:
            found = self._texts.get(key)
            if found is not None:
                self._texts.move_to_end(key)
                return found
        found = list(self._text_ids(text))
        with self._lock:
            self._texts[key] = found
            while len(self._texts) > self._text_cache_size:
                self._texts.popitem(last=False)
        return found
