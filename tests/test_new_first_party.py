"""``vista new`` inside a VISTA checkout: a new plugin goes to ``plugins/KIND/NAME`` (issue 34), shaped
as the architecture tests want a first-party plugin, and ``--into`` keeps envs under ``plugins/envs/``
and registrations out of kits.  Outside a checkout it still makes a stand-alone ``vista-plugin-NAME/``
(tests/test_templates.py covers that project in full)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib
from click.testing import CliRunner

from tests.test_plugin_import_cycles import (
    import_problems,
    layout_problems,
    plugin_projects,
    registration_problems,
)
from vista_rl_sdk import scaffold
from vista_rl_sdk.new_command import new_command


@pytest.fixture(autouse=True)
def private_cookiecutter_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Keep cookiecutter's replay files out of the home directory."""
    folder = tmp_path_factory.mktemp("cookiecutter-config")
    config = folder / "config.yaml"
    config.write_text(f"replay_dir: {folder / 'replay'}\ncookiecutters_dir: {folder / 'cookiecutters'}\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COOKIECUTTER_CONFIG", str(config))
        patch.delenv(scaffold.TEMPLATES_DIR_VARIABLE, raising=False)
        yield


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The bones of a VISTA checkout: the core's package and plugins/ with a kit and a tool plugin."""
    (tmp_path / "core" / "vista_rl").mkdir(parents=True)
    (tmp_path / "core" / "vista_rl" / "__init__.py").write_text("")
    kit = tmp_path / "plugins" / "kits" / "gridkit"
    (kit / "vista_plugin_gridkit").mkdir(parents=True)
    (kit / "vista_plugin_gridkit" / "__init__.py").write_text("")
    (kit / "pyproject.toml").write_text('[project]\nname = "vista-plugin-gridkit"\ndependencies = []\n')
    return tmp_path


def new(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(new_command, [*args, "--author", "Ada"])
    return result.exit_code, result.output


def files(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in root.rglob("*") if path.is_file()}


def test_a_new_env_goes_to_plugins_envs_as_a_first_party_plugin(checkout: Path) -> None:
    code, output = new("env", "maze-run", "--output-dir", str(checkout / "plugins"))
    assert code == 0, output
    project = checkout / "plugins" / "envs" / "maze_run"
    assert f"Created {project}" in output
    assert ".venv/bin/pip install -e plugins/envs/maze_run" in output
    assert 'add "vista-plugin-maze-run" to FIRST_PARTY_DISTRIBUTIONS' in output
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "vista-plugin-maze-run"
    assert meta["entry-points"]["vista_rl"] == {"maze-run": "vista_plugin_maze_run"}
    assert (project / "vista_plugin_maze_run" / "env.py").is_file()
    assert sorted(p.name for p in (project / "tests").iterdir()) == ["test_maze_run.py", "test_maze_run_conformance.py"]
    assert not (project / ".github").exists()  # the checkout's CI runs its tests
    readme = (project / "README.md").read_text()
    assert "at `plugins/envs/maze_run`" in readme and ".venv/bin/python -m pytest plugins/envs/maze_run" in readme
    assert "VISTA_SOURCE" not in readme  # the stand-alone repository's CI section is not there
    assert [p.name for p in (checkout / "plugins" / "envs").iterdir()] == ["maze_run"]  # no staging folder left
    # The generated plugin is what the architecture tests want of a first-party plugin.
    projects = plugin_projects(checkout)
    assert layout_problems(checkout) == registration_problems(projects) == import_problems(projects, checkout) == []


@pytest.mark.parametrize(("kind", "where"), [("tool", "tools"), ("judge", "judges")])
def test_tools_and_judges_go_to_their_kind_from_the_checkout_root_or_their_folder(
        checkout: Path, kind: str, where: str) -> None:
    assert new(kind, "lens", "-o", str(checkout))[0] == 0
    assert (checkout / "plugins" / where / "lens" / "vista_plugin_lens" / f"{kind}.py").is_file()
    assert new(kind, "other-lens", "-o", str(checkout / "plugins" / where))[0] == 0
    assert (checkout / "plugins" / where / "other_lens" / "pyproject.toml").is_file()
    assert layout_problems(checkout) == []


def test_a_wrong_kind_folder_or_a_taken_name_is_refused_before_writing(checkout: Path) -> None:
    before = files(checkout)
    code, output = new("env", "maze", "-o", str(checkout / "plugins" / "tools"))
    assert code == 1 and "a new env goes under plugins/envs/, not plugins/tools/" in output
    code, output = new("tool", "gridkit", "-o", str(checkout / "plugins"))
    assert code == 1 and "plugins/kits/gridkit already exists" in output
    assert files(checkout) == before and not (checkout / "plugins" / "tools").exists()


def test_into_keeps_envs_in_env_plugins_and_registrations_out_of_kits(checkout: Path) -> None:
    assert new("env", "maze", "-o", str(checkout / "plugins"))[0] == 0
    assert new("tool", "lens", "-o", str(checkout / "plugins"))[0] == 0
    before = files(checkout)
    code, output = new("env", "extra", "--into", str(checkout / "plugins" / "tools" / "lens"))
    assert code == 1 and "an env goes under plugins/envs/, and plugins/tools/lens is not there" in output
    code, output = new("judge", "score", "--into", str(checkout / "plugins" / "kits" / "gridkit"))
    assert code == 1 and "plugins/kits/gridkit is a kit, and a kit registers nothing" in output
    assert files(checkout) == before
    # An env's own judge and a second env live with it.
    assert new("judge", "distance", "--into", str(checkout / "plugins" / "envs" / "maze"))[0] == 0
    assert new("env", "hard", "--into", str(checkout / "plugins" / "envs" / "maze"))[0] == 0
    assert (checkout / "plugins" / "envs" / "maze" / "vista_plugin_maze" / "distance_judge.py").is_file()
    assert (checkout / "plugins" / "envs" / "maze" / "tests" / "test_hard_env.py").is_file()


def test_outside_a_checkout_the_project_is_stand_alone(tmp_path: Path) -> None:
    (tmp_path / "plugins").mkdir()  # a plugins/ folder alone does not make a checkout
    assert new("env", "maze", "-o", str(tmp_path / "plugins"))[0] == 0
    project = tmp_path / "plugins" / "vista-plugin-maze"
    assert (project / ".github" / "workflows" / "test.yml").is_file()
    assert "VISTA_SOURCE" in (project / "README.md").read_text()
