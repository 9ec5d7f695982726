"""pytest fixtures for VISTA plugin authors (installed as the ``pytest11`` entry point ``vista``).

``vista_plugin`` registers a plugin object (a module, class or instance with ``@vista.hookimpl``
methods) for the duration of one test, datasette-style, and removes it and its items afterwards.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vista.plugins import PluginHost, PluginInfo, host

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
