"""docs/architecture.md stays true: its one diagram is regenerated from the code and compared, the
generator reads what it claims to read, and every path the page names exists.

Regenerate the diagram with ``python scripts/architecture_diagram.py``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "architecture.md"


def _generator() -> ModuleType:
    if "architecture_diagram" not in sys.modules:
        spec = importlib.util.spec_from_file_location("architecture_diagram",
                                                      REPO / "scripts" / "architecture_diagram.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["architecture_diagram"] = module
        spec.loader.exec_module(module)
    return sys.modules["architecture_diagram"]


def test_the_diagram_is_current() -> None:
    gen = _generator()
    page = PAGE.read_text(encoding="utf-8")
    assert gen.current_block(page) is not None, f"docs/architecture.md lost its diagram markers ({gen.BEGIN})"
    assert gen.current_block(page) == gen.block(gen.read_architecture(REPO)), (
        f"docs/architecture.md's diagram is out of date: run {gen.REGENERATE}")
    assert gen.main(["--check"]) == 0


def test_the_page_has_one_diagram() -> None:
    assert PAGE.read_text(encoding="utf-8").count("```mermaid") == 1


def test_every_plugin_folder_is_drawn_with_what_it_registers() -> None:
    gen = _generator()
    architecture = gen.read_architecture(REPO)
    folders = {(path.parent.parent.name, path.parent.name) for path in REPO.glob("plugins/*/*/pyproject.toml")}
    assert {(plugin.kind, plugin.name) for plugin in architecture.plugins} == folders
    by_name = {plugin.name: plugin for plugin in architecture.plugins}
    assert by_name["sokoban"].hooks == ("register_envs",)
    assert "vista-plugin-gamekit" in by_name["sokoban"].depends_on
    assert by_name["verl"].other_groups == ("verl.plugins",)
    # Guards the import scan: the engines drive episodes through the core's rollout package.
    assert all("rollout" in by_name[engine].core_imports for engine in ("local", "verl"))
    kits = [plugin for plugin in architecture.plugins if plugin.kind == "kits"]
    assert kits and all(not kit.hooks and not kit.other_groups for kit in kits)
    builtin = next(part for part in architecture.core if part.name == "builtin")
    assert "register_envs" in builtin.hooks
    text = gen.mermaid(architecture)
    assert 'envs_sokoban["sokoban<br/>envs"]' in text
    assert "envs_sokoban --> kits_gamekit" in text


def _tiny_repo(root: Path) -> Path:
    """A tree with the real hook specs, one core package, a kit, and an env built on the kit."""
    core = root / "core" / "vista_rl"
    (core / "rollout").mkdir(parents=True)
    shutil.copy(REPO / "core" / "vista_rl" / "hookspecs.py", core / "hookspecs.py")
    (core / "config.py").write_text('"""Run configuration: the models."""\n')
    (core / "rollout" / "__init__.py").write_text('"""The "episodes" <here>. More."""\n')
    kit = root / "plugins" / "kits" / "shapes"
    (kit / "vista_plugin_shapes").mkdir(parents=True)
    (kit / "pyproject.toml").write_text('[project]\nname = "vista_plugin_Shapes"\ndependencies = ["pillow"]\n')
    (kit / "vista_plugin_shapes" / "__init__.py").write_text("def register_envs(register):\n    pass\n")
    env = root / "plugins" / "envs" / "maze"
    (env / "vista_plugin_maze" / "tests").mkdir(parents=True)
    (env / "pyproject.toml").write_text(
        '[project]\nname = "vista-plugin-maze"\n'
        'dependencies = ["vista-rl>=0.1,<0.2", "vista-plugin-shapes>=0.1", "numpy"]\n'
        '[project.entry-points.vista_rl]\nmaze = "vista_plugin_maze"\n')
    (env / "vista_plugin_maze" / "__init__.py").write_text(
        "import vista_rl\nfrom vista_plugin_maze.more import register_judges\n\n"
        "@vista_rl.hookimpl\ndef register_envs(register):\n    pass\n\n"
        "@vista_rl.hookimpl(tryfirst=True)\ndef register_tools(register):\n    pass\n\n"
        "def register_models(register):  # not marked: pluggy would not call it\n    pass\n")
    (env / "vista_plugin_maze" / "more.py").write_text("from vista_rl.config import RunConfig\n")
    (env / "vista_plugin_maze" / "tests" / "test_x.py").write_text("from vista_rl.rollout import X\n")
    return root


def test_the_generator_reads_hooks_dependencies_and_imports_from_the_tree(tmp_path: Path) -> None:
    gen = _generator()
    architecture = gen.read_architecture(_tiny_repo(tmp_path))
    maze, shapes = architecture.plugins
    assert (maze.kind, maze.name, shapes.kind) == ("envs", "maze", "kits")
    assert maze.hooks == ("register_envs", "register_judges", "register_tools")
    assert maze.depends_on == ("numpy", "vista-plugin-shapes")
    assert maze.core_imports == ("config",)  # the tests' import of rollout is not the plugin's
    assert shapes.hooks == ()  # a register_envs without @hookimpl and without an entry point is no hook
    text = gen.mermaid(architecture)
    assert "envs_maze --> kits_shapes" in text
    assert "envs_maze -.-> core_config" in text and "core_rollout" in text
    assert 'kits_shapes["shapes<br/>registers nothing"]' in text
    assert 'envs_maze["maze<br/>envs, judges, tools"]' in text
    assert "#quot;episodes#quot; #lt;here#gt;" in text  # a docstring cannot break the label


def test_check_mode_names_the_command_and_write_mode_fixes_the_page(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _generator()
    root = _tiny_repo(tmp_path)
    (root / "docs").mkdir()
    page = root / "docs" / "architecture.md"
    page.write_text(f"# A\n\n{gen.BEGIN}\nold\n{gen.END}\n\nprose\n")
    monkeypatch.setattr(gen, "REPO", root)
    assert gen.main(["--check"]) == 1
    assert gen.REGENERATE in capsys.readouterr().err
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    text = page.read_text()
    assert text.startswith("# A\n\n") and text.endswith("\n\nprose\n") and "envs_maze" in text
    page.write_text("# no markers\n")
    assert gen.main(["--check"]) == 2
    assert "no diagram markers" in capsys.readouterr().err


def test_every_broken_plugin_is_named_at_once(tmp_path: Path) -> None:
    gen = _generator()
    root = _tiny_repo(tmp_path)
    (root / "plugins" / "kits" / "shapes" / "pyproject.toml").write_text("[project\n")
    maze = root / "plugins" / "envs" / "maze"
    (maze / "vista_plugin_maze" / "__init__.py").unlink()
    with pytest.raises(gen.ArchitectureError) as error:
        gen.read_architecture(root)
    assert "kits/shapes/pyproject.toml" in str(error.value) and "envs/maze" in str(error.value)


_ROOTS = ("core", "sdk", "plugins", "scripts", "tests", "docs", "templates", "contrib", "examples", "benchmarks")
_PLACEHOLDER = re.compile(r"/(?:NAME|KIND|ID)\b.*$")


def _named_paths(page: str) -> set[str]:
    """Repository paths the page names: in backticks, at the start of a line of its folder tree, and
    as relative links."""
    roots = "|".join(_ROOTS)
    found = set(re.findall(rf"`((?:{roots})/[^`\s]*)`", page))
    found |= set(re.findall(rf"^((?:{roots})/\S*)", page, flags=re.MULTILINE))
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page)
    found |= {str((PAGE.parent / link).resolve().relative_to(REPO)) for link in links if "://" not in link}
    return found


def test_every_path_the_page_names_exists() -> None:
    """A path a newcomer follows must be there: a move of a module fails here until the page follows."""
    named = _named_paths(PAGE.read_text(encoding="utf-8"))
    assert {"core/vista_rl/rollout/episode.py", "plugins/envs/NAME", "docs/settings.md"} <= named
    missing = [path for path in sorted(named) if not any(REPO.glob(_PLACEHOLDER.sub("", path).rstrip("/")))]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_the_page_is_linked_from_the_readme_and_the_docs_index() -> None:
    assert "(docs/architecture.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "(architecture.md)" in (REPO / "docs" / "index.md").read_text(encoding="utf-8")
