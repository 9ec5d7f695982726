"""The plugin templates (templates/env, tool, judge) and ``vista new``.

Two layers:

- in-process: bake each template with cookiecutter's API and inspect the files (exact file set,
  pyproject metadata, README sections, nothing left unrendered), the name check of the
  ``pre_gen_project`` hook, and the ``vista new`` command;
- end to end (``slow``): one fresh virtual environment per session (no ``--system-site-packages``,
  so a dependency the packages forgot to declare fails here), into which core and vista-rl-sdk are
  installed as wheels from a copy of this checkout and the three baked plugins with their ``[test]``
  extra; then each baked plugin's own test suite, its lint, the ``vista`` listings and a
  ``vista new`` run that must find the templates inside the installed vista-rl-sdk wheel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml
from click.testing import CliRunner
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter

from vista_rl_sdk import scaffold

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "templates"
KINDS = ("env", "tool", "judge")
#: plugin name and the ids its example registers, per template
BAKED: dict[str, tuple[str, str, str]] = {
    "env": ("tpl-env", "envs", "tpl-env/tpl-env-v0"),
    "tool": ("tpl-tool", "tools", "tpl-tool/rotate"),
    "judge": ("tpl-judge", "judges", "tpl-judge/numeric"),
}
README_SECTIONS = ["## What it is", "## Install", "## Config", "## Metrics", "## Example"]
MODULE_BY_KIND = {"env": "env.py", "tool": "tool.py", "judge": "judge.py"}
PIP_TIMEOUT = 600


@pytest.fixture(scope="module", autouse=True)
def private_cookiecutter_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep cookiecutter's replay files out of the home directory."""
    folder = tmp_path_factory.mktemp("cookiecutter-config")
    config = folder / "config.yaml"
    config.write_text(f"replay_dir: {folder / 'replay'}\ncookiecutters_dir: {folder / 'cookiecutters'}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COOKIECUTTER_CONFIG", str(config))
        patch.delenv(scaffold.TEMPLATES_DIR_VARIABLE, raising=False)
        yield


def bake(kind: str, output_dir: Path, **extra: Any) -> Path:
    name = BAKED[kind][0]
    context = {"plugin_name": name, **extra}
    return Path(cookiecutter(str(TEMPLATES / kind), no_input=True, extra_context=context,
                             output_dir=str(output_dir)))


def relative_files(project: Path) -> set[str]:
    return {path.relative_to(project).as_posix() for path in project.rglob("*") if path.is_file()}


# ------------------------------------------------------------------------------------ in-process
@pytest.mark.parametrize("kind", KINDS)
def test_bake_gives_the_expected_files(kind: str, tmp_path: Path) -> None:
    project = bake(kind, tmp_path)
    name = BAKED[kind][0]
    package = "vista_plugin_" + name.replace("-", "_")
    assert project.name == f"vista-plugin-{name}"
    assert relative_files(project) == {
        ".github/workflows/publish.yml",
        ".github/workflows/test.yml",
        ".gitignore",
        "LICENSE",
        "README.md",
        "pyproject.toml",
        f"{package}/__init__.py",
        f"{package}/{MODULE_BY_KIND[kind]}",
        f"tests/test_{name.replace('-', '_')}.py",
        f"tests/test_{name.replace('-', '_')}_conformance.py",
    }
    for path in project.rglob("*"):
        assert not path.is_symlink(), f"{path} is a link; shared template files must be copied"


@pytest.mark.parametrize("kind", KINDS)
def test_baked_files_are_fully_rendered_and_valid(kind: str, tmp_path: Path) -> None:
    project = bake(kind, tmp_path, author_name="Ada Example", author_email="ada@example.org",
                   github_username="ada-example")
    for path in project.rglob("*"):
        if path.is_file():
            text = path.read_text()
            for marker in ("{{", "{%", "cookiecutter."):
                if path.suffix == ".yml" and marker == "{{":
                    continue  # GitHub expressions ${{ ... }} are meant to stay
                assert marker not in text, f"{path.relative_to(project)} still holds {marker!r}"
            if path.suffix == ".py":
                compile(text, str(path), "exec")
    for workflow in (project / ".github" / "workflows").iterdir():
        assert "jobs" in yaml.safe_load(workflow.read_text())
    assert "Copyright" in (project / "LICENSE").read_text() and "Ada Example" in (project / "LICENSE").read_text()


@pytest.mark.parametrize("kind", KINDS)
def test_pyproject_declares_the_entry_point_and_a_bounded_core(kind: str, tmp_path: Path) -> None:
    name = BAKED[kind][0]
    project = tomllib.loads((bake(kind, tmp_path, github_username="ada") / "pyproject.toml").read_text())["project"]
    assert project["name"] == f"vista-plugin-{name}"
    assert project["entry-points"]["vista_rl"] == {name: "vista_plugin_" + name.replace("-", "_")}
    assert "vista-rl>=0.1,<0.2" in project["dependencies"]
    assert any(dep.startswith("vista-rl-sdk>=") and ",<" in dep for dep in project["optional-dependencies"]["test"])
    assert project["urls"]["Homepage"] == f"https://github.com/ada/vista-plugin-{name}"


def test_pyproject_without_a_github_user_has_no_urls(tmp_path: Path) -> None:
    project = tomllib.loads((bake("judge", tmp_path) / "pyproject.toml").read_text())["project"]
    assert "urls" not in project
    assert project["dependencies"] == ["vista-rl>=0.1,<0.2"]  # a judge needs no Pillow


@pytest.mark.parametrize("kind", KINDS)
def test_readme_has_the_fixed_sections_in_order(kind: str, tmp_path: Path) -> None:
    readme = (bake(kind, tmp_path) / "README.md").read_text()
    positions = [readme.find(section) for section in README_SECTIONS]
    assert -1 not in positions, f"missing sections: {[s for s, p in zip(README_SECTIONS, positions, strict=True) if p < 0]}"
    assert positions == sorted(positions)
    assert BAKED[kind][2] in readme


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Bad_Name", "'bad-name'"),
        ("vista-foo", "'foo'"),
        ("vista_plugin_foo", "'foo'"),
        ("1abc", "starting with a letter"),
        ("a--b", "single hyphens"),
        ("sdk", "reserved"),
        ("x" * 41, "40 or fewer"),
        ('quote"name', "not a valid plugin name"),
    ],
)
def test_pre_gen_hook_refuses_bad_names_and_leaves_nothing(name: str, expected: str, tmp_path: Path,
                                                           capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(FailedHookException):
        cookiecutter(str(TEMPLATES / "env"), no_input=True, extra_context={"plugin_name": name},
                     output_dir=str(tmp_path))
    message = capfd.readouterr().err
    assert "ERROR:" in message and expected in message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["count-objects", "a1", "ocr-2-stage", "x" * 40])
def test_good_names_pass_the_hook(name: str) -> None:
    assert scaffold.name_problem("tool", name) is None


def test_vista_new_is_added_to_the_cli_by_the_sdk_plugin() -> None:
    from vista_rl.cli.main import build_cli

    assert build_cli().commands["new"] is scaffold.new_command
    sdk = next(info for info in __import__("vista_rl").get_plugins() if info.name == "sdk")
    assert sdk.distribution == "vista-rl-sdk" and "register_commands" in sdk.hooks


def test_vista_new_creates_the_project_and_says_what_next(tmp_path: Path) -> None:
    result = CliRunner().invoke(scaffold.new_command, ["tool", "lens", "--output-dir", str(tmp_path),
                                                       "--description", "Zoom into images"])
    assert result.exit_code == 0, result.output
    project = tmp_path / "vista-plugin-lens"
    assert f"Created {project}" in result.output and "vista tools" in result.output
    assert 'description = "Zoom into images"' in (project / "pyproject.toml").read_text()
    assert '"lens/rotate"' in (project / "vista_plugin_lens" / "__init__.py").read_text()


def test_vista_new_refuses_a_bad_name_before_writing(tmp_path: Path) -> None:
    result = CliRunner().invoke(scaffold.new_command, ["env", "My Env", "-o", str(tmp_path)])
    assert result.exit_code == 1
    assert "'my-env'" in result.output
    assert list(tmp_path.iterdir()) == []


def test_vista_new_refuses_to_overwrite(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(scaffold.new_command, ["judge", "twice", "-o", str(tmp_path)]).exit_code == 0
    (tmp_path / "vista-plugin-twice" / "README.md").write_text("my edits")
    result = runner.invoke(scaffold.new_command, ["judge", "twice", "-o", str(tmp_path)])
    assert result.exit_code == 1 and "already exists" in result.output
    assert (tmp_path / "vista-plugin-twice" / "README.md").read_text() == "my edits"


def test_templates_dir_override_must_hold_the_templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(scaffold.TEMPLATES_DIR_VARIABLE, str(tmp_path))
    with pytest.raises(scaffold.ScaffoldError, match="does not hold the templates"):
        scaffold.templates_root()
    shutil.copytree(TEMPLATES, tmp_path / "copy", symlinks=True)
    monkeypatch.setenv(scaffold.TEMPLATES_DIR_VARIABLE, str(tmp_path / "copy"))
    assert scaffold.template_dir("env") == tmp_path / "copy" / "env"


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.1.0", "vista-rl>=0.1,<0.2"), ("0.3.7", "vista-rl>=0.3,<0.4"), ("1.4.0", "vista-rl>=1.4,<2"),
     ("2.0.0rc1", "vista-rl>=2.0,<3")],
)
def test_compatible_requirement(version: str, expected: str) -> None:
    assert scaffold.compatible_requirement("vista-rl", version) == expected


# ------------------------------------------------------------------------------------ end to end
def run(command: list[str], cwd: Path, env: dict[str, str], timeout: int = PIP_TIMEOUT) -> str:
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, f"{' '.join(command)} failed ({completed.returncode}):\n{output[-6000:]}"
    return completed.stdout


def copy_sources(destination: Path) -> tuple[Path, Path]:
    """Core and sdk sources (with the templates) outside the checkout, so the builds neither see
    stale build/ folders nor race with other builds of the working tree."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    core = destination / "core-src"
    core.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, core / name)
    shutil.copytree(REPO / "core", core / "core", ignore=ignore)
    shutil.copytree(REPO / "sdk", destination / "sdk", ignore=ignore)
    shutil.copytree(TEMPLATES, destination / "templates", ignore=ignore, symlinks=True)
    return core, destination / "sdk"


class FreshVenv:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.python = self.bin / "python"
        self.env = {key: value for key, value in os.environ.items()
                    if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not key.startswith("VISTA_")}
        self.env.update(PATH=f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}", VISTA_STRICT_PLUGINS="1",
                        PYTHONDONTWRITEBYTECODE="1")

    def pip(self, *args: str) -> str:
        return run([str(self.python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-input", *args], cwd=self.root, env=self.env)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[FreshVenv, dict[str, Path]]:
    """A fresh venv with core, sdk and the three baked plugins installed (not editable)."""
    work = tmp_path_factory.mktemp("fresh")
    venv = FreshVenv(work / "venv")
    run([sys.executable, "-m", "venv", str(venv.root)], cwd=work, env=venv.env)
    # Build requirements once, then build without isolation: saves a throwaway venv per package.
    venv.pip("setuptools>=68", "wheel")
    core, sdk = copy_sources(work)
    venv.pip("--no-build-isolation", str(core), str(sdk))
    baked = {kind: bake(kind, work / "baked") for kind in KINDS}
    # pip builds in the source folder (build/, *.egg-info); install copies, keep the baked ones pristine.
    copies = [shutil.copytree(project, work / "install" / project.name) for project in baked.values()]
    venv.pip("--no-build-isolation", *(f"{copy}[test]" for copy in copies))
    return venv, baked


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_baked_plugin_passes_its_own_tests_in_a_fresh_venv(kind: str, installed: tuple[FreshVenv, dict[str, Path]]
                                                           ) -> None:
    venv, baked = installed
    output = run([str(venv.python), "-m", "pytest", "-p", "no:cacheprovider"], cwd=baked[kind], env=venv.env)
    summary = output.strip().splitlines()[-1]
    match = re.search(r"(\d+) passed", summary)
    assert match and "failed" not in summary and "error" not in summary, output[-3000:]
    assert int(match.group(1)) >= 5  # the conformance tests and the example's own tests all ran


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_baked_plugin_is_lint_clean(kind: str, installed: tuple[FreshVenv, dict[str, Path]]) -> None:
    venv, baked = installed
    run([str(venv.bin / "ruff"), "check", "--no-cache", "."], cwd=baked[kind], env=venv.env)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_vista_lists_the_baked_items(kind: str, installed: tuple[FreshVenv, dict[str, Path]]) -> None:
    venv, _ = installed
    name, listing, item_id = BAKED[kind]
    items = json.loads(run([str(venv.bin / "vista"), listing, "--json"], cwd=venv.root, env=venv.env))
    spec = next(item for item in items if item["id"] == item_id)
    assert spec["distribution"] == f"vista-plugin-{name}" and spec["version"] == "0.1.0"
    plugins = {p["name"]: p for p in json.loads(run([str(venv.bin / "vista"), "plugins", "--json"],
                                                    cwd=venv.root, env=venv.env))}
    assert plugins[name]["errors"] == [] and plugins[name]["items"] == {listing: [item_id]}


@pytest.mark.slow
def test_vista_new_works_from_the_installed_sdk_wheel(installed: tuple[FreshVenv, dict[str, Path]],
                                                      tmp_path: Path) -> None:
    venv, baked = installed
    where = run([str(venv.python), "-c", "import vista_rl_sdk.scaffold as s; print(s.templates_root())"],
                cwd=tmp_path, env=venv.env).strip()
    assert Path(where).is_relative_to(venv.root), f"templates came from {where}, not the installed wheel"
    run([str(venv.bin / "vista"), "new", "env", "tpl-env", "--output-dir", "out"], cwd=tmp_path, env=venv.env)
    generated = tmp_path / "out" / "vista-plugin-tpl-env"
    assert relative_files(generated) == relative_files(baked["env"])
    for relative in relative_files(generated) - {"LICENSE"}:
        assert (generated / relative).read_text() == (baked["env"] / relative).read_text(), relative
