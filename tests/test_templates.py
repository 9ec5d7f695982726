"""The plugin templates (templates/env, tool, judge) and ``vista new``.

Two layers:

- in-process: bake each template with cookiecutter's API and inspect the files (exact file set,
  pyproject metadata, README sections, nothing left unrendered, the workflows), the name and author
  checks of the ``pre_gen_project`` hook, and the ``vista new`` command (``--into`` included);
- end to end (``slow``): one fresh virtual environment per session (no ``--system-site-packages``,
  so a dependency the packages forgot to declare fails here), into which core and vista-rl-sdk are
  installed from a wheelhouse built from a copy of this checkout, by the generated CI workflow's own
  install step (a git URL of the copy is resolved by the same step, dry-run), and the three baked
  plugins with their ``[test]`` extra (the tool plugin with a judge and an env added by ``--into``);
  then each baked plugin's own test suite, its lint, the ``vista`` listings and a ``vista new`` run
  that must find the templates inside the installed vista-rl-sdk wheel.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml
from click.testing import CliRunner
from cookiecutter.exceptions import FailedHookException
from cookiecutter.main import cookiecutter

from vista_rl_sdk import new_command as new_command_module
from vista_rl_sdk import scaffold
from vista_rl_sdk.add_item import add_item as scaffold_add_item
from vista_rl_sdk.new_command import new_command

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
    context = {"plugin_name": name, "author_name": "Ada Example", **extra}
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

    assert build_cli().commands["new"] is new_command
    sdk = next(info for info in __import__("vista_rl").get_plugins() if info.name == "sdk")
    assert sdk.distribution == "vista-rl-sdk" and "register_commands" in sdk.hooks


def test_vista_new_creates_the_project_and_says_what_next(tmp_path: Path) -> None:
    result = CliRunner().invoke(new_command, ["tool", "lens", "--output-dir", str(tmp_path),
                                                       "--description", "Zoom into images", "--author", "Ada"])
    assert result.exit_code == 0, result.output
    project = tmp_path / "vista-plugin-lens"
    assert f"Created {project}" in result.output and "vista tools" in result.output
    assert 'description = "Zoom into images"' in (project / "pyproject.toml").read_text()
    assert '"lens/rotate"' in (project / "vista_plugin_lens" / "__init__.py").read_text()


def test_vista_new_refuses_a_bad_name_before_writing(tmp_path: Path) -> None:
    result = CliRunner().invoke(new_command, ["env", "My Env", "-o", str(tmp_path), "--author", "Ada"])
    assert result.exit_code == 1
    assert "'my-env'" in result.output
    assert list(tmp_path.iterdir()) == []


def test_vista_new_refuses_to_overwrite(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["judge", "twice", "-o", str(tmp_path), "--author", "Ada"]
    assert runner.invoke(new_command, args).exit_code == 0
    (tmp_path / "vista-plugin-twice" / "README.md").write_text("my edits")
    result = runner.invoke(new_command, args)
    assert result.exit_code == 1 and "already exists" in result.output
    assert (tmp_path / "vista-plugin-twice" / "README.md").read_text() == "my edits"


# ------------------------------------------------------------------------- the author (issue 39)
def test_no_placeholder_author_and_cookiecutter_asks_for_one() -> None:
    for kind in KINDS:
        config = json.loads((TEMPLATES / kind / "cookiecutter.json").read_text())
        assert config["author_name"] == "" and "author_name" in config["__prompts__"]
    assert not [path for path in TEMPLATES.rglob("*") if path.is_file() and "VISTA Contributor" in path.read_text()]


def test_an_empty_author_is_refused_before_anything_is_written(tmp_path: Path,
                                                               capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(FailedHookException):
        bake("env", tmp_path, author_name="  ")
    assert "author" in capfd.readouterr().err and list(tmp_path.iterdir()) == []


def test_the_author_reaches_pyproject_and_license_quotes_included(tmp_path: Path) -> None:
    author = 'Ada "the Countess" Lovelace'
    project = bake("judge", tmp_path, author_name=author, author_email="ada@example.org")
    (entry,) = tomllib.loads((project / "pyproject.toml").read_text())["project"]["authors"]
    assert entry == {"name": author, "email": "ada@example.org"}
    assert f"Copyright {datetime.now(timezone.utc).year} {author}" in (project / "LICENSE").read_text()


def test_vista_new_takes_the_author_from_the_option_git_or_a_prompt(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def author_of(project: Path) -> dict[str, str]:
        return tomllib.loads((project / "pyproject.toml").read_text())["project"]["authors"][0]

    git_config = tmp_path / "gitconfig"
    git_config.write_text("[user]\n\tname = Grace From Git\n\temail = grace@example.org\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(git_config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    runner = CliRunner()
    assert runner.invoke(new_command, ["judge", "from-git", "-o", str(tmp_path)]).exit_code == 0
    assert author_of(tmp_path / "vista-plugin-from-git") == {"name": "Grace From Git", "email": "grace@example.org"}
    result = runner.invoke(new_command, ["judge", "given", "-o", str(tmp_path), "--author", "Ada", "--email", ""])
    assert result.exit_code == 0 and author_of(tmp_path / "vista-plugin-given") == {"name": "Ada"}
    monkeypatch.setattr(new_command_module, "_interactive", lambda: True)  # a terminal: asked, git's name the default
    result = runner.invoke(new_command, ["judge", "asked", "-o", str(tmp_path)], input="Katherine\n")
    assert result.exit_code == 0 and "Author (for pyproject.toml and the LICENSE) [Grace From Git]" in result.output
    assert author_of(tmp_path / "vista-plugin-asked")["name"] == "Katherine"
    monkeypatch.setattr(new_command_module, "_interactive", lambda: False)
    git_config.write_text("")
    result = runner.invoke(new_command, ["judge", "nobody", "-o", str(tmp_path)])
    assert result.exit_code == 1 and "--author" in result.output
    assert not (tmp_path / "vista-plugin-nobody").exists()


# ------------------------------------------------------------------ docs and workflows (issue 39)
def test_templates_readme_describes_what_is_generated() -> None:
    readme = (TEMPLATES / "README.md").read_text()
    assert "vista-rl>=0.1,<0.2" in readme and "[project.entry-points.vista_rl]" in readme
    assert "`vista>=" not in readme and "the `vista` entry point" not in readme
    assert "--into" in readme and "--author" in readme and "VISTA_SOURCE" in readme


def install_step(project: Path) -> str:
    """The shell script of the generated test workflow's install step."""
    workflow = yaml.safe_load((project / ".github" / "workflows" / "test.yml").read_text())
    (step,) = [step for step in workflow["jobs"]["test"]["steps"] if "pip install" in step.get("run", "")]
    return str(step["run"])


def test_test_workflow_takes_vista_from_one_variable(tmp_path: Path) -> None:
    project = bake("env", tmp_path)
    workflow = yaml.safe_load((project / ".github" / "workflows" / "test.yml").read_text())
    assert workflow["env"] == {"VISTA_SOURCE": "${{ vars.VISTA_SOURCE }}"}
    script = install_step(project)
    assert '"vista-rl @ ${VISTA_SOURCE}" "vista-rl-sdk @ ${VISTA_SOURCE}#subdirectory=sdk"' in script
    assert '--find-links "${VISTA_SOURCE}"' in script
    readme = (project / "README.md").read_text()
    assert "## Development" in readme and "`VISTA_SOURCE`" in readme and "git+https://github.com/OWNER/vista.git@REF" in readme
    assert "`vista-plugin-tpl-env`, this repository, the workflow `publish.yml`" in " ".join(readme.split())


def test_publish_workflow_uses_trusted_publishing_only(tmp_path: Path) -> None:
    text = (bake("tool", tmp_path) / ".github" / "workflows" / "publish.yml").read_text()
    workflow = yaml.safe_load(text)
    jobs = workflow["jobs"]
    assert jobs["test"]["uses"] == "./.github/workflows/test.yml" and jobs["publish"]["needs"] == ["build"]
    assert jobs["publish"]["permissions"] == {"id-token": "write"}
    assert [job for job, spec in jobs.items() if "id-token" in str(spec.get("permissions", {}))] == ["publish"]
    assert any(step.get("uses", "").startswith("pypa/gh-action-pypi-publish@") for step in jobs["publish"]["steps"])
    assert "secrets." not in text and "password" not in text and "token:" not in text.replace("id-token:", "")


# ------------------------------------------------------------- vista new --into (issue 39, item 3)
def registered(project: Path, hook: str) -> list[tuple[str, str, dict[str, Any]]]:
    """What the project's ``hook`` registers: (id, target, metadata), by running its __init__.py."""
    namespace: dict[str, Any] = {}
    exec(compile((project / f"vista_plugin_{project.name[13:].replace('-', '_')}" / "__init__.py").read_text(),
                 "__init__.py", "exec"), namespace)
    calls: list[tuple[str, str, dict[str, Any]]] = []
    if hook in namespace:
        namespace[hook](lambda item_id, target, **metadata: calls.append((item_id, target, metadata)))
    return calls


def test_vista_new_into_adds_module_registration_and_test(tmp_path: Path) -> None:
    project = bake("env", tmp_path)
    package = project / "vista_plugin_tpl_env"
    runner = CliRunner()
    result = runner.invoke(new_command, ["judge", "distance", "--into", str(project),
                                                  "--description", "Steps left to the exit"])
    assert result.exit_code == 0, result.output
    assert "Added judge tpl-env/distance" in result.output
    assert (package / "distance_judge.py").is_file() and (project / "tests" / "test_distance_judge.py").is_file()
    assert 'JUDGE_ID = "tpl-env/distance"' in (project / "tests" / "test_distance_judge.py").read_text()
    assert registered(project, "register_judges") == [
        ("tpl-env/distance", "vista_plugin_tpl_env.distance_judge:DistanceJudge",
         {"description": "Steps left to the exit",
          "check_args": {"reference": "42", "correct": "42.0", "wrong": ["39", "44.5", "forty-two", "-42"]}})]
    # a second env goes into the existing register_envs; a tool gets a hook of its own
    assert runner.invoke(new_command, ["env", "hard", "--into", str(project)]).exit_code == 0
    assert runner.invoke(new_command, ["tool", "peek", "--into", str(project)]).exit_code == 0
    assert [item_id for item_id, _, _ in registered(project, "register_envs")] == ["tpl-env/tpl-env-v0",
                                                                                     "tpl-env/hard-v0"]
    assert registered(project, "register_tools")[0][:2] == ("tpl-env/peek", "vista_plugin_tpl_env.peek_tool:PeekTool")
    assert 'name = "peek"' in (package / "peek_tool.py").read_text()
    assert "class HardEnv(Env)" in (package / "hard_env.py").read_text()
    assert (package / "__init__.py").read_text().count("import vista_rl") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["judge", "Distance"], "not a valid item name"),
        (["env", "hard-v1"], "without a version"),
        (["judge", "numeric"], "already registers tpl-judge/numeric"),  # the template's own example
        (["judge", "distance"], "already exists"),  # added twice: the module is there
    ],
)
def test_vista_new_into_refuses_and_writes_nothing(args: list[str], message: str, tmp_path: Path) -> None:
    project = bake("judge", tmp_path)
    runner = CliRunner()
    if args[1] == "distance":
        assert runner.invoke(new_command, [*args, "--into", str(project)]).exit_code == 0
    before = {path: path.read_bytes() for path in project.rglob("*") if path.is_file()}
    result = runner.invoke(new_command, [*args, "--into", str(project)])
    assert result.exit_code == 1 and message in result.output, result.output
    assert {path: path.read_bytes() for path in project.rglob("*") if path.is_file()} == before


def test_vista_new_into_needs_a_plugin_project(tmp_path: Path) -> None:
    result = CliRunner().invoke(new_command, ["judge", "distance", "--into", str(tmp_path)])
    assert result.exit_code == 1 and "has no pyproject.toml" in result.output


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


def copy_sources(destination: Path) -> Path:
    """The core, the SDK and the templates in the repository's layout (core at the root, ``sdk/``,
    ``templates/``), outside the checkout so the builds neither see stale build/ folders nor race with
    other builds of the working tree; committed to git, as a git URL in ``VISTA_SOURCE`` finds it."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    root = destination / "vista-src"
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "core", root / "core", ignore=ignore)
    shutil.copytree(REPO / "sdk", root / "sdk", ignore=ignore)
    shutil.copytree(TEMPLATES, root / "templates", ignore=ignore, symlinks=True)
    git = ["git", "-c", "user.name=VISTA tests", "-c", "user.email=tests@example.org", "-c", "init.defaultBranch=main"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        run([*git, *command], cwd=root, env=dict(os.environ))
    return root


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

    def workflow_install(self, project: Path, source: str, **pip_env: str) -> str:
        """The generated test.yml's own install step, run in ``project`` with ``VISTA_SOURCE=source``.
        ``PIP_NO_BUILD_ISOLATION=0`` (pip's spelling of --no-build-isolation) only saves a build env."""
        env = {**self.env, "VISTA_SOURCE": source, "PIP_NO_BUILD_ISOLATION": "0", **pip_env}
        return run(["bash", "-c", install_step(project)], cwd=project, env=env)


#: What `vista new KIND ITEM --into` adds to the baked tool plugin before it is installed.
ADDED_TO_TOOL = {"judges": "tpl-tool/distance", "envs": "tpl-tool/extra-v0"}


@dataclass
class Installed:
    venv: FreshVenv
    baked: dict[str, Path]
    git_dry_run: str  # pip's output for VISTA_SOURCE=git+file://...


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """A fresh venv with core, sdk and the three baked plugins installed: VISTA from a wheelhouse
    through the env plugin's generated CI install step (VISTA is on no index here), the others not
    editable.  The tool plugin first gets a judge and an env with ``vista new --into``."""
    work = tmp_path_factory.mktemp("fresh")
    venv = FreshVenv(work / "venv")
    run([sys.executable, "-m", "venv", str(venv.root)], cwd=work, env=venv.env)
    # Build requirements once, then build without isolation: saves a throwaway venv per package.
    venv.pip("setuptools>=68", "wheel")
    source = copy_sources(work)
    run([str(venv.python), "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
         str(work / "wheelhouse"), str(source), str(source / "sdk")], cwd=work, env=venv.env)
    baked = {kind: bake(kind, work / "baked") for kind in KINDS}
    scaffold_add_item("judge", "distance", baked["tool"])
    scaffold_add_item("env", "extra", baked["tool"])
    # pip builds in the source folder (build/, *.egg-info); install copies, keep the baked ones pristine.
    copies = {kind: shutil.copytree(project, work / "install" / project.name) for kind, project in baked.items()}
    # a git URL: resolved for real (clone, metadata of core, sdk/ and the plugin), not installed
    # (a host in the URL: pip refuses "name @ git+file:///path", whose netloc is empty)
    git_dry_run = venv.workflow_install(copies["env"], f"git+file://localhost{source}", PIP_DRY_RUN="1",
                                        PIP_NO_DEPS="1")
    venv.workflow_install(copies["env"], str(work / "wheelhouse"))
    venv.pip("--no-build-isolation", *(f"{copies[kind]}[test]" for kind in ("tool", "judge")))
    return Installed(venv, baked, git_dry_run)


@pytest.mark.slow
def test_generated_ci_installs_vista_from_a_wheelhouse_or_a_git_url(installed: Installed) -> None:
    """Issue 39: the generated test.yml installed vista-rl from the index, where it is not published."""
    venv = installed.venv
    shown = run([str(venv.python), "-m", "pip", "list", "--format", "json"], cwd=venv.root, env=venv.env)
    versions = {item["name"]: item for item in json.loads(shown)}
    assert versions["vista-rl"]["version"] == versions["vista-rl-sdk"]["version"] == "0.1.0"
    assert "editable_project_location" in versions["vista-plugin-tpl-env"]  # the workflow's `pip install -e`
    assert re.search(r"Would install vista-rl-0\.1\.0 vista-rl-sdk-0\.1\.0", installed.git_dry_run), installed.git_dry_run
    assert "Would install vista-plugin-tpl-env-0.1.0" in installed.git_dry_run


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_baked_plugin_passes_its_own_tests_in_a_fresh_venv(kind: str, installed: Installed) -> None:
    venv, baked = installed.venv, installed.baked
    output = run([str(venv.python), "-m", "pytest", "-p", "no:cacheprovider", "-vv"], cwd=baked[kind], env=venv.env)
    summary = output.strip().splitlines()[-1]
    match = re.search(r"(\d+) passed", summary)
    assert match and "failed" not in summary and "error" not in summary, output[-3000:]
    assert int(match.group(1)) >= 5  # the conformance tests and the example's own tests all ran
    if kind == "tool":  # the items `vista new --into` added: conformance-checked, and their own tests ran
        for item_id in ADDED_TO_TOOL.values():
            assert re.search(rf"test_conformance\[\w+-{re.escape(item_id)}\] PASSED", output), item_id
        assert "test_distance_judge.py" in output and "test_extra_env.py" in output


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_baked_plugin_is_lint_clean(kind: str, installed: Installed) -> None:
    run([str(installed.venv.bin / "ruff"), "check", "--no-cache", "."], cwd=installed.baked[kind], env=installed.venv.env)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_vista_lists_the_baked_items(kind: str, installed: Installed) -> None:
    venv = installed.venv
    name, listing, item_id = BAKED[kind]
    items = json.loads(run([str(venv.bin / "vista"), listing, "--json"], cwd=venv.root, env=venv.env))
    spec = next(item for item in items if item["id"] == item_id)
    assert spec["distribution"] == f"vista-plugin-{name}" and spec["version"] == "0.1.0"
    plugins = {p["name"]: p for p in json.loads(run([str(venv.bin / "vista"), "plugins", "--json"],
                                                    cwd=venv.root, env=venv.env))}
    expected = {listing: [item_id]}
    if kind == "tool":
        expected.update({added_kind: [added_id] for added_kind, added_id in ADDED_TO_TOOL.items()})
    assert plugins[name]["errors"] == [] and plugins[name]["items"] == expected


@pytest.mark.slow
def test_vista_new_works_from_the_installed_sdk_wheel(installed: Installed, tmp_path: Path) -> None:
    venv, baked = installed.venv, installed.baked
    where = run([str(venv.python), "-c", "import vista_rl_sdk.scaffold as s; print(s.templates_root())"],
                cwd=tmp_path, env=venv.env).strip()
    assert Path(where).is_relative_to(venv.root), f"templates came from {where}, not the installed wheel"
    run([str(venv.bin / "vista"), "new", "env", "tpl-env", "--output-dir", "out", "--author", "Ada Example",
         "--email", ""], cwd=tmp_path, env=venv.env)
    generated = tmp_path / "out" / "vista-plugin-tpl-env"
    assert relative_files(generated) == relative_files(baked["env"])
    for relative in relative_files(generated) - {"LICENSE"}:
        assert (generated / relative).read_text() == (baked["env"] / relative).read_text(), relative
    # --into from the wheel's templates too
    run([str(venv.bin / "vista"), "new", "judge", "distance", "--into", str(generated)], cwd=tmp_path, env=venv.env)
    assert (generated / "vista_plugin_tpl_env" / "distance_judge.py").is_file()
