"""The env-plugin tutorial (docs/tutorial-env-plugin.md) followed as a reader would, verbatim.

Its ```bash blocks run in order in one shell session per block (the working directory carries over,
as in a terminal), between them the edits it asks for: each ```python or ```py block whose first
line is ``# <path>.py`` is written (appended, in page order) to that file of the generated plugin.

Offline and quick: a throw-away venv (its own ``pip`` and ``vista``) that sees the repository's venv
through a ``.pth``, so ``pip install vista-rl vista-rl-sdk`` finds them installed, and pip runs with
``PIP_NO_INDEX`` and without build isolation: the only thing it installs is the generated plugin,
into the throw-away venv, never into the shared one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.docblocks import DOCS, FENCE

TUTORIAL = DOCS / "tutorial-env-plugin.md"
FILE_HEADER = re.compile(r"^# (?P<path>[\w/.-]+\.py)\s*$")


def page_steps(markdown: Path) -> list[tuple[str, str]]:
    """The page's bash blocks and file blocks, in order: ``("bash", script)`` or ``(path, code)``."""
    steps: list[tuple[str, str]] = []
    for match in FENCE.finditer(markdown.read_text()):
        language, body = match.group("lang"), match.group("body")
        if language == "bash":
            steps.append(("bash", body))
        elif language in ("python", "py") and body.strip():
            header = FILE_HEADER.match(body.splitlines()[0])
            if header is not None:
                steps.append((header.group("path"), body))
    return steps


SCRIPTS = {"pip": "from pip._internal.cli.main import main", "vista": "from vista_rl.cli import main"}


def overlay_venv(root: Path) -> dict[str, str]:
    """A venv of its own (``pip`` and ``vista`` scripts) that imports the repository's venv's
    packages; returns the environment to run the reader's commands in.  pip, run by this venv's
    python, installs into this venv (its ``sys.prefix``) and sees the repository's packages as
    installed."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, capture_output=True,
                   timeout=120)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = root / "lib" / version / "site-packages"
    # addsitedir (not a bare path) so the editable installs' own .pth files there are processed too
    (site / "zz_vista_repo_venv.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    for name, entry in SCRIPTS.items():
        script = root / "bin" / name
        script.write_text(f"#!{root / 'bin' / 'python'}\nimport sys\n{entry}\nsys.exit(main())\n")
        script.chmod(0o755)
    env = {key: value for key, value in os.environ.items()
           if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not key.startswith(("VISTA_", "PIP_"))}
    env.update(VIRTUAL_ENV=str(root), PATH=f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
    return env


@pytest.mark.slow
def test_the_tutorial_runs_verbatim(tmp_path: Path) -> None:
    steps = page_steps(TUTORIAL)
    assert [kind for kind, _ in steps].count("bash") >= 2
    env = overlay_venv(tmp_path / "venv")
    workdir = tmp_path / "reader"
    workdir.mkdir()
    written: set[Path] = set()
    outputs: list[str] = []
    for kind, text in steps:
        if kind != "bash":
            target = workdir / text.splitlines()[0][2:].strip()
            assert target.parent.is_dir(), f"the tutorial edits {target}, which the generated plugin lacks"
            mode = "a" if target in written else "w"  # the first block of a file replaces the template's
            with target.open(mode) as handle:
                handle.write(("\n\n" if mode == "a" else "") + text)
            written.add(target)
            continue
        script = f"set -euo pipefail\ncd {str(workdir)!r}\n{text}\npwd > {str(tmp_path / 'cwd')!r}\n"
        completed = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
        output = completed.stdout + completed.stderr
        assert completed.returncode == 0, f"tutorial block failed:\n{text}\n--- output ---\n{output[-6000:]}"
        outputs.append(output)
        workdir = Path((tmp_path / "cwd").read_text().strip())
    project = tmp_path / "reader" / "vista-plugin-dot-side"
    assert written >= {project / "vista_plugin_dot_side" / "env.py", project / "tests" / "test_dot_side.py"}
    assert not list(Path(sysconfig.get_paths()["purelib"]).glob("*dot_side*")), "it went into the repository's venv"
    installed = list((tmp_path / "venv").glob("lib/python*/site-packages/__editable__*dot_side*"))
    assert installed, "the generated plugin was not installed into the throw-away venv"
    # the last block: `vista eval` of the oracle, then the plugin's own tests (conformance + the tutorial's)
    last = outputs[-1]
    assert re.search(r"\b4 passed\b", last) and "failed" not in last, last[-3000:]
    assert "dot-side/dot-side-v0" in last


@pytest.mark.parametrize("kind", ["env", "tool", "judge"])
def test_vista_new_description_is_the_registered_one(kind: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``vista new --description`` reaches the package metadata and the registered item (the
    tutorial's ``vista envs`` shows it), quotes and backslashes included."""
    import importlib

    import tomllib
    from click.testing import CliRunner

    from vista_rl_sdk import scaffold

    config = tmp_path / "cookiecutter.yaml"  # keep cookiecutter's replay files out of the home directory
    config.write_text(f"replay_dir: {tmp_path / 'replay'}\ncookiecutters_dir: {tmp_path / 'cc'}\n")
    monkeypatch.setenv("COOKIECUTTER_CONFIG", str(config))
    description = 'Is the "dot" on the left? A back\\slash too'
    result = CliRunner().invoke(scaffold.new_command, [kind, "described", "-o", str(tmp_path / "out"),
                                                       "--description", description, "--author", "Ada"])
    assert result.exit_code == 0, result.output
    project = tmp_path / "out" / "vista-plugin-described"
    assert tomllib.loads((project / "pyproject.toml").read_text())["project"]["description"] == description
    monkeypatch.syspath_prepend(str(project))
    module = importlib.import_module("vista_plugin_described")
    registered: list[dict[str, object]] = []
    hook = next(getattr(module, name) for name in dir(module) if name.startswith("register_"))
    hook(lambda item_id, target, **metadata: registered.append(metadata))
    assert [item["description"] for item in registered] == [description]
    assert module.__doc__.startswith(description)
    monkeypatch.delitem(sys.modules, "vista_plugin_described")


def test_no_doc_installs_the_index_s_unrelated_vista() -> None:
    """No shell block of the docs installs ``vista``: on the package index that is an
    autonomous-driving simulator; ours is ``vista-rl``."""
    bare = re.compile(r"pip install\b[^\n`]*?(?<![\w/.-])vista(?![\w-])")
    pages = [DOCS.parent / "README.md", DOCS.parent / "CONTRIBUTING.md", *DOCS.rglob("*.md"),
             *DOCS.parent.glob("plugins/*/README.md"), *DOCS.parent.glob("templates/*/*/README.md")]
    blocks = [(page, fence.group("body")) for page in pages if page.is_file()
              for fence in FENCE.finditer(page.read_text()) if fence.group("lang") in ("bash", "sh", "shell", "")]
    offenders = [f"{page.relative_to(DOCS.parent)}: {match.group(0)}" for page, body in blocks
                 for match in bare.finditer(body)]
    assert len(blocks) > 20
    assert offenders == []
    assert bare.search("pip install vista vista-rl-sdk") and not bare.search("pip install vista-rl vista-rl-sdk")
