"""The release path as a user meets it: build every distribution into a wheelhouse, then in a fresh
venv with the package index reachable, ``pip install --find-links WHEELHOUSE <plugin>`` and use it.

This is the test that caught the name collision: a plugin requiring ``vista>=0.1`` was satisfied by
another project's ``vista`` 0.1.0 from the index.  It asserts that the core pip resolves is ours
(summary and version from this repository's pyproject.toml) and that no foreign ``vista`` came along.
Set VISTA_WHEELHOUSE to reuse a wheelhouse built by ``scripts/build-dists.sh``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def run(args: list[str], **kwargs) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("VISTA_WHEELHOUSE"):
        return Path(os.environ["VISTA_WHEELHOUSE"])
    out = tmp_path_factory.mktemp("wheelhouse")
    env = {**os.environ, "VISTA_VENV": str(Path(sys.executable).parent.parent)}
    run(["bash", str(ROOT / "scripts" / "build-dists.sh"), str(out)], env=env, cwd=ROOT)
    return out


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("user-venv")
    venv.create(root, with_pip=True)
    return root


def pip_install(user_venv: Path, wheelhouse: Path, *requirements: str) -> None:
    run([str(user_venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--find-links", str(wheelhouse), *requirements])


def installed_core(user_venv: Path) -> dict[str, str | None]:
    code = ("import json, importlib.metadata as m\n"
            "def find(name):\n"
            "    try: d = m.distribution(name)\n"
            "    except m.PackageNotFoundError: return None\n"
            "    return {'version': d.version, 'summary': d.metadata['Summary']}\n"
            "print(json.dumps({'core': find('vista-rl'), 'foreign': find('vista'), 'sdk': find('vista-sdk')}))")
    return json.loads(run([str(user_venv / "bin" / "python"), "-c", code]))


def test_every_distribution_is_in_the_wheelhouse(wheelhouse: Path):
    names = {path.name.split("-")[0] for path in wheelhouse.glob("*.whl")}
    expected = {"vista_rl", "vista_rl_sdk"} | {
        "vista_plugin_" + p.name.replace("-", "_") for p in (ROOT / "plugins").glob("*/*") if (p / "pyproject.toml").exists()}
    assert expected <= names, expected - names
    assert len(list(wheelhouse.glob("*.tar.gz"))) == len(list(wheelhouse.glob("*.whl")))


def test_game_plugin_installs_our_core_and_runs(wheelhouse: Path, user_venv: Path, tmp_path: Path):
    pip_install(user_venv, wheelhouse, "vista-plugin-sokoban")
    ours = metadata.metadata("vista-rl")  # this checkout's core, installed editable in the dev venv
    found = installed_core(user_venv)
    assert found["core"] == {"version": ours["Version"], "summary": ours["Summary"]}
    assert found["foreign"] is None and found["sdk"] is None
    vista = str(user_venv / "bin" / "vista")
    envs = {item["id"] for item in json.loads(run([vista, "envs", "--json"]))}
    assert "sokoban/sokoban-v0" in envs
    out = tmp_path / "eval"
    run([vista, "eval", "--env", "sokoban/sokoban-v0", "--model", "scripted:oracle", "--episodes", "3",
         "--max-turns", "20", "--out", str(out), "--no-html"])
    assert json.loads((out / "metrics.json").read_text())["success_rate"]["value"] == 1.0


def test_plugin_with_heavy_dependencies_installs_and_runs(wheelhouse: Path, user_venv: Path, tmp_path: Path):
    """chartqa pulls three more first-party plugins from the wheelhouse (vqa, judges, tools) and
    OpenCV, Tesseract bindings and matplotlib from the index."""
    pip_install(user_venv, wheelhouse, "vista-plugin-chartqa")
    vista = str(user_venv / "bin" / "vista")
    plugins = {p["distribution"] for p in json.loads(run([vista, "plugins", "--json"]))}
    assert {"vista-plugin-chartqa", "vista-plugin-vqa", "vista-plugin-judges", "vista-plugin-tools"} <= plugins
    out = tmp_path / "eval"
    run([vista, "eval", "--env", "chartqa/synthetic-v0", "--model", "scripted:oracle", "--episodes", "2",
         "--out", str(out), "--no-html"])
    assert json.loads((out / "metrics.json").read_text())["success_rate"]["value"] == 1.0
    assert installed_core(user_venv)["foreign"] is None
