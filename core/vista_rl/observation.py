"""Observations: text with one ``<image>`` placeholder per image, plus the images.

Keeping text and images together, with the placeholder count checked on construction, is what lets
every backend (HF chat templates, OpenAI content parts, vLLM) place images exactly where the env
meant them to go.
"""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass, field
from typing import Any, Literal

from PIL import Image

IMAGE_PLACEHOLDER = "<image>"


class PlaceholderMismatchError(ValueError):
    """The number of ``<image>`` placeholders differs from the number of images."""


def count_placeholders(text: str) -> int:
    return text.count(IMAGE_PLACEHOLDER)


def escape_placeholders(text: str) -> str:
    """Model or tool text that happens to contain ``<image>`` must not be taken for an image slot:
    an env that echoes the model's output into its feedback would otherwise build an observation
    whose placeholders outnumber its images."""
    return text.replace(IMAGE_PLACEHOLDER, "<image >")


def escape_tool_text(text: str) -> str:
    """Text that a model or a tool chose (a tool name, an error quoting the call, a result), made
    safe to show in a tool message: ``<image>`` is escaped (it would claim an image slot, and a tool
    named ``<image>`` used to fail the episode with a placeholder mismatch) and so is the ``<|``
    opening of chat-template special tokens (``<|im_end|>``, ``<|image_pad|>``), which a tokenizer
    would otherwise read as control tokens inside the prompt."""
    return escape_placeholders(text).replace("<|", "< |")


def image_to_data_url(image: Image.Image, image_format: str = "PNG") -> str:
    """Encode an image as a ``data:`` URL, the form OpenAI-compatible servers accept."""
    buffer = io.BytesIO()
    image.save(buffer, format=image_format)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"data:image/{image_format.lower()};base64,{encoded}"


@dataclass
class Observation:
    """What the agent sees after a reset or step."""

    text: str
    images: list[Image.Image] = field(default_factory=list)

    def __post_init__(self) -> None:
        found = count_placeholders(self.text)
        if found != len(self.images):
            raise PlaceholderMismatchError(
                f"observation text has {found} {IMAGE_PLACEHOLDER} placeholder(s) but "
                f"{len(self.images)} image(s); they must match one to one"
            )

    def segments(self) -> list[str | Image.Image]:
        """Text pieces and images in order (empty text pieces dropped)."""
        pieces = self.text.split(IMAGE_PLACEHOLDER)
        out: list[str | Image.Image] = []
        for index, piece in enumerate(pieces):
            if piece:
                out.append(piece)
            if index < len(self.images):
                out.append(self.images[index])
        return out

    def to_content_parts(self, style: Literal["openai", "hf"] = "hf") -> list[dict[str, Any]]:
        """Chat content parts: ``hf`` keeps PIL images (for processors' chat templates),
        ``openai`` encodes them as base64 data URLs."""
        parts: list[dict[str, Any]] = []
        for segment in self.segments():
            if isinstance(segment, str):
                parts.append({"type": "text", "text": segment})
            elif style == "openai":
                parts.append({"type": "image_url", "image_url": {"url": image_to_data_url(segment)}})
            else:
                parts.append({"type": "image", "image": segment})
        return parts


@dataclass
class Message:
    """One chat message; ``content`` follows the Observation convention for images."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    images: list[Image.Image] = field(default_factory=list)

    def __post_init__(self) -> None:
        Observation(self.content, self.images)  # validates the placeholder count

    @classmethod
    def from_observation(cls, observation: Observation, role: Literal["user", "tool"] = "user") -> Message:
        return cls(role=role, content=observation.text, images=list(observation.images))

    def to_chat(self, style: Literal["openai", "hf"] = "hf") -> dict[str, Any]:
        if not self.images:
            return {"role": self.role, "content": self.content}
        return {"role": self.role, "content": Observation(self.content, self.images).to_content_parts(style)}


Chat = list[Message]


def observation_fingerprint(observation: Observation) -> str:
    """A hash of the text and every image's mode, size and pixels, to compare observations across
    processes (determinism checks, restored remote envs).  Equal observations hash equal whatever
    object identity or PNG encoding they came with."""
    digest = hashlib.sha256(observation.text.encode("utf-8", "surrogatepass"))
    for image in observation.images:
        digest.update(f"{image.mode}{image.size}".encode())
        digest.update(image.tobytes())
    return digest.hexdigest()
