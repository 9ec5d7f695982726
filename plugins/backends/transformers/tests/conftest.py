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


@pytest.fixture(scope="session")
def server(backend: object) -> Iterator[object]:
    """``vista serve``'s app over the tiny model on 127.0.0.1, started once for every test module
    that talks to it (raw httpx in test_transformers_server, the official client in
    test_transformers_openai_client)."""
    from vista_plugin_transformers.server import BackgroundServer, create_app

    with BackgroundServer(create_app(backend, "tiny", batch_window_ms=50.0)) as running:  # type: ignore[arg-type]
        yield running


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
