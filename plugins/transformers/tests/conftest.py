"""Shared fixtures: one loaded backend over the cached tiny Qwen2.5-VL for the whole module run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image

from vista_rl import Message


@pytest.fixture(scope="session")
def backend(tiny_model_dir: Path) -> Iterator[object]:
    from vista_plugin_transformers.backend import TransformersBackend

    yield TransformersBackend(path=str(tiny_model_dir), device="cpu")


def make_image_chat(index: int, size: tuple[int, int] = (112, 112), question: str = "Where is the box?") -> list[Message]:
    colour = (40 * index % 256, 90, 200 - 10 * index % 200)
    return [
        Message("system", "Answer with <answer>Up</answer> or another direction."),
        Message("user", f"Step {index}: <image> {question}", [Image.new("RGB", size, colour)]),
    ]


@pytest.fixture
def image_chat() -> Callable[..., list[Message]]:
    """``image_chat(index, size=(112, 112), question=...)``: a system + user chat with one image."""
    return make_image_chat
