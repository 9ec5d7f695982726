from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")


@pytest.fixture(scope="session")
def tiny_grounding_dino(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from vista_plugin_detection.tiny import init_tiny_detector

    return init_tiny_detector(tmp_path_factory.mktemp("gdino"), "grounding_dino", seed=0)


@pytest.fixture(scope="session")
def tiny_owlv2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from vista_plugin_detection.tiny import init_tiny_detector

    return init_tiny_detector(tmp_path_factory.mktemp("owlv2"), "owlv2", seed=0)
