from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from vista_rl import ToolContext


def scene() -> Image.Image:
    image = Image.new("RGB", (96, 64), (240, 240, 240))
    image.paste((200, 20, 20), (10, 10, 40, 40))
    image.paste((20, 20, 200), (55, 20, 90, 60))
    return image


@pytest.fixture()
def context() -> ToolContext:
    return ToolContext(images=[scene()], metadata={"full_resolution": {0: scene().resize((192, 128))}, "note": {1, 2}})


@pytest.fixture(scope="session")
def tiny_detector(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    pytest.importorskip("vista_plugin_detection")
    from vista_plugin_detection.tiny import init_tiny_detector

    return init_tiny_detector(tmp_path_factory.mktemp("gdino"), "grounding_dino", seed=0)
