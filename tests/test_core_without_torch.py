"""The core is small: ``pip install vista-rl`` alone works without torch.

The local training engine is the plugin ``vista-plugin-local`` (as verl's is ``vista-plugin-verl``),
so contracts, plugin host, registries, parsing, rollout, store and CLI must import and run in an
environment where torch does not exist.  A meta-path blocker in the dev venv would only show that
nothing *imports* torch; a fresh venv also shows that nothing needs a package the core does not
declare.  So: a new venv (no pip, no site packages), the core installed by ``pip install --no-deps``
from this checkout, and beside it exactly the distributions its ``dependencies`` need, transitively,
linked from the dev venv (no network; the same files the index would give).  ``torch`` cannot be
found there at all, and the CLI still lists, validates and explains what is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: What the core must never need; each belongs to a plugin (vista-plugin-local brings them all).
HEAVY = ("torch", "transformers", "peft", "tensorboard", "matplotlib", "vista_plugin_local")


def core_requirements() -> list[Requirement]:
    """The core's own ``dependencies`` from this checkout's pyproject.toml (not the installed copy's)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [Requirement(text) for text in project["dependencies"]]


def requirement_closure(requirements: list[Requirement]) -> list[metadata.Distribution]:
    """The installed distributions that ``requirements`` pull in, transitively (extras not taken)."""
    seen: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = str(canonicalize_name(requirement.name))
        if name in seen:
            continue
        dist = metadata.distribution(requirement.name)
        seen[name] = dist
        todo.extend(Requirement(text) for text in dist.requires or [])
    return list(seen.values())


def link_distribution(dist: metadata.Distribution, site: Path) -> None:
    """Put ``dist``'s top-level modules and its metadata into ``site`` as symlinks."""
    base = Path(str(dist.locate_file("")))
    tops = {Path(str(file)).parts[0] for file in dist.files or [] if not str(file).startswith("..")}
    for top in tops:
        source, target = base / top, site / top
        if top.endswith(".pth") or top == "__pycache__" or target.exists() or not source.exists():
            continue
        target.symlink_to(source, target_is_directory=source.is_dir())


@pytest.fixture(scope="module")
def core_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("core-venv")
    env_dir = root / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True, env={"PATH": os.environ["PATH"]})
    site = Path(purelib.stdout.strip())
    # Build from a copy, so the checkout gets no build/ or egg-info (other runs may be building).
    source = root / "src"
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source)
    shutil.copy(ROOT / "README.md", source)
    shutil.copytree(ROOT / "core", source / "core", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(site), str(source)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for dist in requirement_closure(core_requirements()):
        link_distribution(dist, site)
    return python


def run_in(python: Path, code: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``code`` in the fresh venv: nothing of the dev environment (no PYTHONPATH, no user site)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "VISTA_CONFIG_DIR": str(tmp_path / "config"),
           "PYTHONNOUSERSITE": "1", "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)


def test_the_venv_holds_only_the_core_and_its_declared_requirements(core_venv: Path, tmp_path: Path) -> None:
    code = ("import importlib.metadata as m, importlib.util as u, json, sys\n"
            "print(json.dumps({'dists': sorted(d.metadata['Name'] for d in m.distributions()),\n"
            f"                  'found': [n for n in {HEAVY!r} if u.find_spec(n)],\n"
            "                  'prefix': sys.prefix}))")
    done = run_in(core_venv, code, tmp_path)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["found"] == []  # torch & co. do not exist here: not blocked, absent
    assert seen["prefix"] == str(core_venv.parent.parent)
    assert "vista-rl" in seen["dists"] and not any(name.startswith("vista-plugin") for name in seen["dists"])


def test_core_imports_and_cli_run_without_torch(core_venv: Path, tmp_path: Path) -> None:
    """Every public core module imports, the registries answer, and the CLI lists what is there."""
    code = (
        "import io, json, sys, contextlib\n"
        "import vista_rl, vista_rl.rollout, vista_rl.cli, vista_rl.store, vista_rl.config, vista_rl.hookspecs\n"
        "import vista_rl.engine_contract, vista_rl.serving, vista_rl.model_paths, vista_rl.baselines\n"
        "from vista_rl.cli import main\n"
        "out = {}\n"
        "for command in ('envs', 'engines', 'estimators', 'families', 'plugins'):\n"
        "    buffer = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buffer):\n"
        "        try:\n"
        "            main([command, '--json'])\n"
        "        except SystemExit as exc:\n"
        "            assert not exc.code, (command, exc.code)\n"
        "    out[command] = json.loads(buffer.getvalue())\n"
        "parsed = vista_rl.parse_response('<think>a</think><answer>LEFT</answer>')\n"
        "out['answer'] = parsed.answer\n"
        f"out['loaded'] = sorted(n for n in {HEAVY!r} if n in sys.modules)\n"
        "print(json.dumps(out))\n"
    )
    done = run_in(core_venv, code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["loaded"] == []
    assert out["answer"] == "LEFT"
    assert out["engines"] == []  # the local engine is a plugin now, and none is installed here
    assert out["families"] == []
    assert "vista/blank-images" in {item["id"] for item in out["envs"]}
    assert {"grpo", "gae", "bilevel_gae"} <= {item["id"] for item in out["estimators"]}  # listed lazily
    assert [p["distribution"] for p in out["plugins"]] == ["vista-rl"] * len(out["plugins"])


def test_train_without_an_engine_says_which_plugin_to_install(core_venv: Path, tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("env: {id: vista/blank-images}\nmodel: {path: /nowhere}\n", encoding="utf-8")
    code = "from vista_rl.cli.main import main; main()"
    done = run_in(core_venv, code, tmp_path, "train", str(config))
    assert done.returncode != 0
    message = " ".join((done.stdout + done.stderr).split())
    assert "no engine 'local' is registered" in message, message
    assert "pip install vista-plugin-local" in message, message
    assert "Traceback" not in done.stderr  # a config error, told in one line

