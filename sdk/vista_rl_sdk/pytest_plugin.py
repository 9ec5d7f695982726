"""pytest fixtures for VISTA plugin authors (installed as the ``pytest11`` entry point ``vista``).

``vista_plugin`` registers a plugin object (a module, class or instance with ``@vista_rl.hookimpl``
methods) for the duration of one test, datasette-style, and removes it and its items afterwards.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vista_rl import PluginHost, PluginInfo, host

_counter = itertools.count()

RegisterPlugin = Callable[..., str]


@pytest.fixture
def vista_host() -> PluginHost:
    """The process's plugin host, loaded."""
    current = host()
    current.load()
    return current


@pytest.fixture
def vista_plugin(vista_host: PluginHost) -> Iterator[RegisterPlugin]:
    """Call ``vista_plugin(obj, name=None)`` to register ``obj`` as a plugin for this test only."""
    names: list[str] = []

    def register(plugin: Any, name: str | None = None, distribution: str = "vista-test-plugin",
                 version: str = "0.0.0") -> str:
        plugin_name = name or f"test-plugin-{next(_counter)}"
        info = PluginInfo(name=plugin_name, distribution=distribution, version=version,
                          module=getattr(plugin, "__name__", type(plugin).__name__))
        vista_host.register_object(plugin, info)
        names.append(plugin_name)
        return plugin_name

    yield register
    for plugin_name in names:
        vista_host.unregister(plugin_name)


@pytest.fixture(scope="session")
def tiny_model_dir(request: pytest.FixtureRequest) -> Path:
    """A tiny random Qwen2.5-VL model directory (seed 0), built once and cached under
    ``$VISTA_CACHE/vista-tiny`` or ``<rootdir>/.cache/vista-tiny``.  Skips the test when the
    ``models`` extra (transformers, tokenizers) is not installed."""
    pytest.importorskip("transformers", reason="tiny models need vista-rl-sdk[models] (transformers)")
    from vista_rl_sdk.tiny_models import cached_tiny_model

    cache = None if os.environ.get("VISTA_CACHE") else request.config.rootpath / ".cache" / "vista-tiny"
    return cached_tiny_model(seed=0, cache_dir=cache)


@pytest.fixture(scope="session")
def tiny_internvl_dir(request: pytest.FixtureRequest) -> Path:
    """A tiny random InternVL model directory (seed 0; transformers-native ``InternVLForConditionalGeneration``
    with a Qwen2 language model), built once and cached like :func:`tiny_model_dir`."""
    pytest.importorskip("transformers", reason="tiny models need vista-rl-sdk[models] (transformers)")
    from vista_rl_sdk.tiny_models import cached_tiny_model

    cache = None if os.environ.get("VISTA_CACHE") else request.config.rootpath / ".cache" / "vista-tiny"
    return cached_tiny_model(arch="internvl", seed=0, cache_dir=cache)
