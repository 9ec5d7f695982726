"""What the local engine must know about one VLM family, in one place.

Why: the engine tokenizes conversations itself (the sampled ids must stay the trained ids, see
``vista_plugin_local.chat_tokens``), so it needs each family's chat layout, image tokens, image
processor output and position-id quirks.  Those live behind :class:`ModelFamily`, registered with
the ``register_model_families`` hook, so supporting a new family (Qwen2.5-VL and InternVL are
built in) is a plugin, not an engine change.  This module is torch-free; tensors are typed ``Any``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ModelFamily:
    """One VLM family's chat layout and vision inputs.

    The defaults describe ChatML (``<|im_start|>role\\n...<|im_end|>\\n``), which Qwen2-VL,
    Qwen2.5-VL and InternVL3 share; a family overrides what differs.  Subclasses must set
    :attr:`name`, :attr:`image_token`, :attr:`vision_control_tokens` and implement :meth:`vision_span`,
    :meth:`image_inputs`, :meth:`vision_tokens` and :meth:`batch_inputs`.
    """

    #: The family's name (shown in errors).
    name: str = ""
    #: ``config.model_type`` values of the checkpoints this family handles.
    model_types: tuple[str, ...] = ()
    #: Processor class names this family handles (used when only a processor is at hand).
    processor_classes: tuple[str, ...] = ()
    #: Ends every message; the policy stops sampling at it.
    end_token: str = "<|im_end|>"
    #: Chat-control tokens dropped from decoded responses.
    control_tokens: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")
    #: The token repeated once per vision embedding (``<|image_pad|>``, ``<IMG_CONTEXT>``).
    image_token: str = ""
    #: Tokens that must exist and may never be sampled (a stray image token breaks the next forward).
    vision_control_tokens: tuple[str, ...] = ()
    #: Tokens also suppressed when the vocabulary has them.
    optional_forbidden_tokens: tuple[str, ...] = ("<|endoftext|>",)
    #: Role that tool results are shown as.
    tool_role: str = "user"
    #: What follows an assistant message's end token before the next message.
    message_separator: str = "\n"
    #: The generation prompt.
    assistant_header: str = "<|im_start|>assistant\n"

    def message_text(self, role: str, content: str) -> str:
        """One whole message (``content`` still holds ``<image>`` placeholders)."""
        role = self.tool_role if role == "tool" else role
        return f"<|im_start|>{role}\n{content}{self.end_token}\n"

    @property
    def required_tokens(self) -> tuple[str, ...]:
        """Tokens the tokenizer must have for this family's layout."""
        return (self.end_token, "<|im_start|>", self.image_token, *self.vision_control_tokens)

    def vision_span(self, count: int) -> str:
        """The text an image becomes: ``count`` image tokens with the family's delimiters."""
        raise NotImplementedError

    def image_inputs(self, processor: Any, images: Sequence[Any]) -> list[Any]:
        """One ``vista_plugin_local.chat_tokens.ImageInput`` per PIL image (its own tensors)."""
        raise NotImplementedError

    def vision_tokens(self, processor: Any, image: Any) -> int:
        """How many :attr:`image_token` tokens one ``ImageInput`` expands to."""
        raise NotImplementedError

    def batch_inputs(self, images: Sequence[Any], input_ids: Any, attention_mask: Any,
                     image_token_id: int) -> dict[str, Any]:
        """Model inputs beyond ``input_ids``/``attention_mask`` for a padded batch whose
        ``image_token_id`` positions hold ``images`` in order (pixel values, grids, token types...)."""
        raise NotImplementedError

    def reset_generation_state(self, model: Any) -> None:
        """Clear state a model caches between calls (Qwen's M-RoPE ``rope_deltas``): the engine
        calls this before every forward pass and ``generate``."""

    def matches(self, *, model_type: str | None = None, processor: Any = None) -> bool:
        """Whether this family handles a checkpoint with this ``model_type`` or ``processor``."""
        if model_type is not None:
            return model_type in self.model_types
        names = {cls.__name__ for cls in type(processor).__mro__} if processor is not None else set()
        return bool(names & set(self.processor_classes))
