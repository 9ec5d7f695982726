"""The plugins' architecture: no import cycles inside any distribution (the SDK, every first-party
plugin and every contrib plugin), and the layout of ``plugins/`` with the arrows between plugins.

Cycles: the same static graph and policy as the core's check in :mod:`tests.test_import_graph` (every
import counts, module-level or in a function, also under ``TYPE_CHECKING``), applied to each package on
its own: a cycle between two modules of one plugin hides the same way a core one does (the toolserve
proxy imported its maker lazily to close itself, and the maker imported the proxy).

Layout (issue 34): a plugin sits at ``plugins/KIND/NAME`` with KIND in :data:`KINDS`; a kit registers
nothing; every import of another plugin is declared in the importer's dependencies; sibling envs share
code through a kit, and an env builds only on a base env (:data:`BASE_ENVS`); no plugin takes another's
private names.  All checked statically with :mod:`ast` and ``tomllib``: no plugin code runs.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomllib

from tests.test_import_graph import find_cycles, import_graph

REPO = Path(__file__).resolve().parents[1]


def distribution_packages() -> list[tuple[str, Path]]:
    """(import name, source folder) of the SDK and of the package of every plugins/* and contrib/* project."""
    found = [("vista_rl_sdk", REPO / "sdk" / "vista_rl_sdk")]
    for project in sorted([*REPO.glob("plugins/*/*/pyproject.toml"), *REPO.glob("contrib/*/pyproject.toml")]):
        packages = sorted(p for p in project.parent.glob("vista_plugin_*") if (p / "__init__.py").is_file())
        assert len(packages) == 1, f"{project.parent}: expected one vista_plugin_* package, found {packages}"
        found.append((packages[0].name, packages[0]))
    return found


PACKAGES = distribution_packages()


def test_every_distribution_is_checked() -> None:
    """Guards the test: a glob that found nothing would pass vacuously."""
    projects = len(list(REPO.glob("plugins/*/*/pyproject.toml"))) + len(list(REPO.glob("contrib/*/pyproject.toml")))
    assert len(PACKAGES) == projects + 1 and projects >= 20
    names = {name for name, _ in PACKAGES}
    assert {"vista_rl_sdk", "vista_plugin_toolserve", "vista_plugin_datasets", "vista_plugin_local"} <= names
    graph = import_graph(REPO / "plugins" / "servers" / "toolserve" / "vista_plugin_toolserve", "vista_plugin_toolserve")
    assert "vista_plugin_toolserve.proxy" in graph["vista_plugin_toolserve.services"]


@pytest.mark.parametrize(("package", "root"), PACKAGES, ids=[name for name, _ in PACKAGES])
def test_distribution_has_no_import_cycles(package: str, root: Path) -> None:
    cycles = find_cycles(import_graph(root, package))
    assert not cycles, f"import cycles in {package}:\n" + "\n".join(" -> ".join(c) for c in cycles)


# ----------------------------------------------------------------------------- the plugin layout
# plugins/ is grouped by kind (issue 34): a plugin lives at plugins/KIND/NAME.  The rules below keep it
# that way and keep the dependency arrows honest; each is checked on this repository and, so that it
# cannot pass vacuously, on a small tree built in a temp folder with one deliberate break per rule.
KINDS: tuple[str, ...] = ("envs", "engines", "backends", "tools", "judges", "servers", "kits")
# Env plugins that other envs are built on, with the reason.  Any other env-to-env import is sibling
# helper sharing, and what two plugins share belongs in a kit (plugins/kits/), not in one of them.
BASE_ENVS: dict[str, str] = {
    "vista_plugin_vqa": "the tool-QA env base (ToolQAEnv, QAEnvConfig, Problem, record sources): chartqa, "
                        "visual_search and grounding are visual-QA envs built on it",
    "vista_plugin_datasets": "the record datasets (loaders, adapters' common parts, judge specs): vqa and "
                             "grounding read task records through it",
}
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PluginProject:
    """One plugins/KIND/NAME project, read from its pyproject.toml."""

    folder: Path
    kind: str
    distribution: str  # canonical
    package: str
    dependencies: frozenset[str]  # canonical names of [project] dependencies
    entry_points: dict[str, dict[str, str]]  # group -> {name: target}

    @property
    def where(self) -> str:
        return f"plugins/{self.kind}/{self.folder.name}"


def read_project(folder: Path) -> PluginProject:
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {canonical(m.group(1)) for m in map(_REQUIREMENT_NAME.match, project.get("dependencies", [])) if m}
    return PluginProject(folder, folder.parent.name, canonical(project["name"]), f"vista_plugin_{folder.name}",
                         frozenset(names), project.get("entry-points", {}))


def layout_problems(repo: Path) -> list[str]:
    """Every folder under plugins/ is a kind from :data:`KINDS`, every folder under a kind is one
    plugin project named after its folder (package ``vista_plugin_NAME``, distribution ``vista-plugin-NAME``)."""
    plugins = repo / "plugins"
    found: list[str] = []
    for stray in sorted({*plugins.glob("pyproject.toml"), *plugins.glob("*/pyproject.toml"),
                         *plugins.glob("*/*/*/pyproject.toml")}):
        found.append(f"{stray.parent.relative_to(repo)}: a plugin project must sit at plugins/KIND/NAME "
                     f"(KIND one of {', '.join(KINDS)}); move it there")
    for kind in sorted(p for p in plugins.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        if kind.name not in KINDS:
            found.append(f"plugins/{kind.name}: not a kind folder; plugins are grouped as plugins/KIND/NAME with "
                         f"KIND one of {', '.join(KINDS)}: move what it holds into the matching kind folder")
            continue
        for folder in sorted(p for p in kind.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
            where = f"plugins/{kind.name}/{folder.name}"
            if not (folder / "pyproject.toml").is_file():
                found.append(f"{where}: no pyproject.toml; every folder under plugins/{kind.name}/ is one plugin project")
                continue
            plugin = read_project(folder)
            if not (folder / plugin.package / "__init__.py").is_file():
                found.append(f"{where}: its package must be {plugin.package}/ (named after the folder)")
            expected = canonical(f"vista-plugin-{folder.name}")
            if plugin.distribution != expected:
                found.append(f"{where}: distribution {plugin.distribution!r} should be {expected!r} (named after the "
                             "folder, so path, distribution and import name tell the same story)")
    return found


def plugin_projects(repo: Path) -> list[PluginProject]:
    return [read_project(p.parent) for p in sorted(repo.glob("plugins/*/*/pyproject.toml"))
            if p.parent.parent.name in KINDS]


def _uses_hookimpl(tree: ast.AST) -> int | None:
    """The line of the first use of ``hookimpl`` (a vista hook implementation), or ``None``."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == "hookimpl") or (
                isinstance(node, ast.Name) and node.id == "hookimpl") or (
                isinstance(node, ast.ImportFrom) and any(alias.name == "hookimpl" for alias in node.names)):
            return getattr(node, "lineno", 0)
    return None


def _sources(plugin: PluginProject) -> list[Path]:
    return sorted((plugin.folder / plugin.package).rglob("*.py"))


def registration_problems(plugins: list[PluginProject]) -> list[str]:
    """A kit is a library: no entry point of any group and no hook implementation.  Every other plugin
    declares one ``vista_rl`` entry point, its own package (that is what makes it a plugin)."""
    found: list[str] = []
    for plugin in plugins:
        if plugin.kind == "kits":
            for group in sorted(plugin.entry_points):
                found.append(f"{plugin.where}/pyproject.toml: a kit registers nothing, but it declares "
                             f"[project.entry-points.{group}]; remove it, or move the plugin out of plugins/kits/ "
                             "to the kind it registers")
            for path in _sources(plugin):
                line = _uses_hookimpl(ast.parse(path.read_text(encoding="utf-8")))
                if line is not None:
                    found.append(f"{path.relative_to(plugin.folder.parents[2])}:{line}: a kit implements no vista hook "
                                 "(hookimpl); move the registration to the plugin that uses the kit")
            continue
        targets = plugin.entry_points.get("vista_rl", {})
        if [str(t).split(":")[0] for t in targets.values()] != [plugin.package]:
            found.append(f"{plugin.where}/pyproject.toml: a plugin declares exactly one [project.entry-points.vista_rl] "
                         f"entry naming its package {plugin.package} (found {dict(targets)}); a library that "
                         "registers nothing belongs in plugins/kits/")
    return found


@dataclass(frozen=True)
class CrossImport:
    """One import, in a plugin's package, of another plugin's package."""

    where: str  # path:line
    target: str  # the imported plugin's package
    module: str  # the full module imported from
    names: tuple[str, ...]  # the names taken from it ('' for a plain import)
    guarded: bool  # under ``if importlib.util.find_spec(<target>)`` or ``try: ... except ImportError``


def _guards(node: ast.AST) -> set[str]:
    """The packages a statement makes optional: ``find_spec("pkg")`` in an ``if`` test."""
    return {arg.value.split(".")[0] for call in ast.walk(node) if isinstance(call, ast.Call)
            and getattr(call.func, "attr", getattr(call.func, "id", "")) == "find_spec"
            for arg in call.args[:1] if isinstance(arg, ast.Constant) and isinstance(arg.value, str)}


def _catches_import_error(node: ast.Try) -> bool:
    names = {getattr(n, "id", "") for h in node.handlers if h.type is not None for n in ast.walk(h.type)}
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def cross_imports(path: Path, own: str, where: str) -> list[CrossImport]:
    """Each import of another ``vista_plugin_*`` package in one source file."""
    found: list[CrossImport] = []

    def visit(node: ast.AST, optional: frozenset[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                modules = ([(a.name, ("",)) for a in child.names] if isinstance(child, ast.Import) else
                           [(child.module or "", tuple(a.name for a in child.names))] if child.level == 0 else [])
                for module, names in modules:
                    target = module.split(".")[0]
                    if target.startswith("vista_plugin_") and target != own:
                        guarded = target in optional or "*" in optional
                        found.append(CrossImport(f"{where}:{child.lineno}", target, module, names, guarded))
            if isinstance(child, ast.If):
                visit(child.test, optional)
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), optional | _guards(child.test))
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), optional)
            elif isinstance(child, ast.Try) and _catches_import_error(child):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), optional | {"*"})
                for part in (*child.handlers, *child.orelse, *child.finalbody):
                    visit(ast.Module(body=[part], type_ignores=[]) if isinstance(part, ast.stmt) else part, optional)
            else:
                visit(child, optional)

    visit(ast.parse(path.read_text(encoding="utf-8")), frozenset())
    return found


def import_problems(plugins: list[PluginProject], repo: Path) -> list[str]:
    """Every import of another plugin is declared in the importer's [project] dependencies (or is an
    optional import, guarded); kits import only kits; an env imports another env only when that env is
    a base (:data:`BASE_ENVS`); nothing private (a ``_name`` or ``_module``) is taken from another plugin."""
    by_package = {plugin.package: plugin for plugin in plugins}
    found: list[str] = []
    for plugin in plugins:
        for path in _sources(plugin):
            for use in cross_imports(path, plugin.package, str(path.relative_to(repo))):
                target = by_package.get(use.target)
                if target is None:
                    found.append(f"{use.where}: imports {use.target}, which no plugins/KIND/NAME project provides")
                    continue
                if target.distribution not in plugin.dependencies and not use.guarded:
                    found.append(f"{use.where}: imports {use.module}, but {target.distribution} is not in the "
                                 f"dependencies of {plugin.where}/pyproject.toml: add \"{target.distribution}>=0.1,<0.2\" "
                                 f"(or, for an optional feature, import it under "
                                 f"`if importlib.util.find_spec(\"{use.target}\")`)")
                if plugin.kind == "kits" and target.kind != "kits":
                    found.append(f"{use.where}: the kit {plugin.package} imports the plugin {use.target}; kits sit below "
                                 "plugins and import only other kits: move the shared part into a kit")
                if plugin.kind == "envs" and target.kind == "envs" and use.target not in BASE_ENVS:
                    found.append(f"{use.where}: the env {plugin.package} imports {use.module}, the helpers of another "
                                 "env; what two envs share moves into a kit (plugins/kits/, e.g. vista-plugin-scenekit), "
                                 f"or, if {use.target} is a base that envs are built on, add it to BASE_ENVS in "
                                 "tests/test_plugin_import_cycles.py with the reason")
                private = [part for part in (*use.module.split(".")[1:], *use.names) if part.startswith("_")]
                if private:
                    found.append(f"{use.where}: {plugin.package} takes the private {', '.join(private)} from "
                                 f"{use.module}; make it public in {target.where} (no leading underscore, with a "
                                 "docstring) or move it into a kit")
    return found


def test_every_plugin_sits_at_plugins_kind_name() -> None:
    problems = layout_problems(REPO)
    assert not problems, "plugin layout:\n" + "\n".join(problems)
    assert {p.kind for p in plugin_projects(REPO)} == set(KINDS)  # guards the glob: every kind is in use


def test_kits_register_nothing_and_plugins_one_entry_point() -> None:
    projects = plugin_projects(REPO)
    assert len([p for p in projects if p.kind == "kits"]) >= 3
    problems = registration_problems(projects)
    assert not problems, "registration:\n" + "\n".join(problems)


def test_cross_plugin_imports_are_declared_and_go_through_kits_or_bases() -> None:
    projects = plugin_projects(REPO)
    uses = [use for p in projects for path in _sources(p)
            for use in cross_imports(path, p.package, str(path.relative_to(REPO)))]
    # Guards the scan: it sees the known arrows (grounding on the scene kit and on vqa, verl's optional local).
    assert {(u.where.split("/")[2], u.target) for u in uses} >= {("grounding", "vista_plugin_scenekit"),
                                                                 ("grounding", "vista_plugin_vqa")}
    assert any(u.target == "vista_plugin_local" and u.guarded for u in uses)
    problems = import_problems(projects, REPO)
    assert not problems, "imports between plugins:\n" + "\n".join(problems)


def _project(repo: Path, kind: str, name: str, deps: tuple[str, ...] = (), entry: bool = True,
             source: str = "") -> Path:
    folder = repo / "plugins" / kind / name
    (folder / f"vista_plugin_{name}").mkdir(parents=True)
    (folder / f"vista_plugin_{name}" / "__init__.py").write_text(source)
    points = f'\n[project.entry-points.vista_rl]\n{name} = "vista_plugin_{name}"\n' if entry else ""
    (folder / "pyproject.toml").write_text(f'[project]\nname = "vista-plugin-{name.replace("_", "-")}"\n'
                                           f"dependencies = {list(deps)!r}\n{points}".replace("'", '"'))
    return folder


def test_each_rule_fails_on_a_broken_tree(tmp_path: Path) -> None:
    """One deliberate break per rule, on a tree of its own; the fixed tree passes."""
    _project(tmp_path, "envs", "vqa", ("vista-rl>=0.1",))
    _project(tmp_path, "envs", "search", ("vista-plugin-vqa>=0.1,<0.2", "vista-plugin-kit"),
             source="from vista_plugin_vqa.base import Problem\nfrom vista_plugin_kit import draw\n")
    _project(tmp_path, "kits", "kit", entry=False, source="def draw():\n    pass\n")
    _project(tmp_path, "engines", "verl", source=(
        "import importlib.util\n"
        "def section():\n    if importlib.util.find_spec('vista_plugin_search'):\n"
        "        from vista_plugin_search import x\n"
        "try:\n    import vista_plugin_kit\nexcept ImportError:\n    pass\n"))
    projects = plugin_projects(tmp_path)
    assert (layout_problems(tmp_path), registration_problems(projects), import_problems(projects, tmp_path)) == (
        [], [], [])

    # A plugin outside a kind folder, a kind folder holding a file tree that is no project, a misnamed package.
    (tmp_path / "plugins" / "widgets" / "w").mkdir(parents=True)
    (tmp_path / "plugins" / "envs" / "loose").mkdir()
    _project(tmp_path, "envs", "nested/deeper")
    layout = "\n".join(layout_problems(tmp_path))
    assert "plugins/widgets: not a kind folder" in layout
    assert "plugins/envs/loose: no pyproject.toml" in layout
    assert "plugins/envs/nested/deeper: a plugin project must sit at plugins/KIND/NAME" in layout

    # A kit that registers, a plugin that does not.
    _project(tmp_path, "kits", "busy", source="import vista_rl\n@vista_rl.hookimpl\ndef register_envs(register):\n"
                                              "    pass\n")
    _project(tmp_path, "tools", "idle", entry=False)
    registration = "\n".join(registration_problems(plugin_projects(tmp_path)))
    assert "plugins/kits/busy/pyproject.toml: a kit registers nothing" in registration
    assert "plugins/kits/busy/vista_plugin_busy/__init__.py:2: a kit implements no vista hook" in registration
    assert "plugins/tools/idle/pyproject.toml: a plugin declares exactly one" in registration

    # An undeclared import, a sibling env's helpers, a private name, a kit importing a plugin.
    _project(tmp_path, "envs", "spot", ("vista-plugin-search",), source=(
        "from vista_plugin_search.small import _colours\nimport vista_plugin_tools\n"))
    _project(tmp_path, "kits", "lowkit", ("vista-plugin-vqa",), entry=False, source="import vista_plugin_vqa\n")
    imports = "\n".join(import_problems(plugin_projects(tmp_path), tmp_path))
    assert "spot/__init__.py:2: imports vista_plugin_tools, which no plugins/KIND/NAME project provides" in imports
    assert ("vista_plugin_spot/__init__.py:1: the env vista_plugin_spot imports vista_plugin_search.small, "
            "the helpers of another env") in imports
    assert "takes the private _colours from vista_plugin_search.small" in imports
    assert "the kit vista_plugin_lowkit imports the plugin vista_plugin_vqa" in imports
    _project(tmp_path, "tools", "tools")
    imports = "\n".join(import_problems(plugin_projects(tmp_path), tmp_path))
    assert ("vista_plugin_spot/__init__.py:2: imports vista_plugin_tools, but vista-plugin-tools is not in the "
            "dependencies of plugins/envs/spot/pyproject.toml") in imports
