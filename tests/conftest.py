"""Shared fixtures for core tests.

``installed_plugin`` writes a real distribution (``*.dist-info`` with METADATA and entry_points.txt
plus its module) into a directory on ``sys.path``: importlib.metadata discovers it exactly as it
discovers a pip-installed package, so these tests exercise entry-point discovery, not direct import.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from vista_rl._plugins import PluginHost

InstallPlugin = Callable[..., Path]


def write_distribution(site: Path, dist_name: str, version: str, entry_name: str, module: str, source: str,
                       group: str = "vista_rl", requires: tuple[str, ...] = ()) -> None:
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{dist_name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    requires_lines = "".join(f"Requires-Dist: {line}\n" for line in requires)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist_name}\nVersion: {version}\n{requires_lines}",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{group}]\n{entry_name} = {module}\n", encoding="utf-8")


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


@pytest.fixture
def install_plugin(plugin_site: Path) -> InstallPlugin:
    def install(dist_name: str, source: str, version: str = "1.2.3", entry_name: str | None = None,
                module: str | None = None, group: str = "vista_rl", requires: tuple[str, ...] = ()) -> Path:
        module_name = module or dist_name.replace("-", "_")
        write_distribution(plugin_site, dist_name, version, entry_name or module_name, module_name, source,
                           group=group, requires=requires)
        return plugin_site

    return install


@pytest.fixture
def fresh_host() -> PluginHost:
    """A plugin host of its own, so tests never disturb the process-wide one."""
    return PluginHost()


def run_vista(*args: str, site: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ``vista`` CLI in a subprocess (with an extra site dir on PYTHONPATH)."""
    environ = dict(os.environ)
    for switch in ("VISTA_LOAD_PLUGINS", "VISTA_DISABLE_PLUGINS", "VISTA_STRICT_PLUGINS", "VISTA_TRACE_PLUGINS"):
        environ.pop(switch, None)
    if site is not None:
        environ["PYTHONPATH"] = os.pathsep.join([str(site), environ.get("PYTHONPATH", "")])
    environ.setdefault("COLUMNS", "250")
    environ.update(env or {})
    code = "import sys; from vista_rl.cli.main import main; main(sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=environ,
                          timeout=120)
