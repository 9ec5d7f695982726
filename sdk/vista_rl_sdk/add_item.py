"""``vista new judge|tool|env NAME --into PLUGIN_DIR``: add one item to an existing plugin.

Why: a plugin grows (an env needs a judge, then a tool), and ``vista new`` could only make a new
package.  The item comes from the same cookiecutter template as a new plugin, rendered for the
existing plugin's name and package, so it is the same working example with the same tests; three
things are taken from the rendering:

- the item's module, ``<package>/<name>_<kind>.py``;
- its ``register(...)`` call, added to the plugin's ``register_<kind>s`` hook in ``__init__.py``
  (the whole hook function when the plugin has none yet);
- its behaviour test, ``tests/test_<name>_<kind>.py``.

The plugin's conformance test needs no change: it checks every item the plugin registers.  Nothing
is written unless every part can be: an existing file, an id already registered, or an
``__init__.py`` that would not parse afterwards stops it with a message.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 (the sdk depends on tomli there)
    import tomli as tomllib

from vista_rl_sdk.scaffold import ScaffoldError, item_name_problem, template_dir

#: The plugin's ``register_*`` hook for each kind of item.
HOOKS = {"env": "register_envs", "tool": "register_tools", "judge": "register_judges"}
VERSIONED = re.compile(r"-v\d+$")


@dataclass(frozen=True)
class PluginDir:
    """An existing plugin project: its folder, entry-point name (the id namespace) and package."""

    root: Path
    name: str
    package: str

    @property
    def package_dir(self) -> Path:
        return self.root.joinpath(*self.package.split("."))


@dataclass(frozen=True)
class AddedItem:
    """What :func:`add_item` did: the new id and the files it wrote or changed."""

    item_id: str
    module: Path
    test: Path
    init: Path


def read_plugin(root: Path) -> PluginDir:
    """The plugin in ``root``, from the ``vista_rl`` entry point of its ``pyproject.toml``."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        raise ScaffoldError(f"{root} has no pyproject.toml: give --into the folder of a plugin project "
                            "(the one `vista new` created)")
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise ScaffoldError(f"{pyproject} is not valid TOML: {exc}") from None
    entry_points = project.get("entry-points", {}).get("vista_rl", {})
    if not isinstance(entry_points, dict) or len(entry_points) != 1:
        raise ScaffoldError(f"{pyproject} must declare exactly one [project.entry-points.vista_rl] entry "
                            f"(found {len(entry_points) if isinstance(entry_points, dict) else 0})")
    (name, package), = entry_points.items()
    plugin = PluginDir(root, str(name), str(package).split(":")[0])
    if not (plugin.package_dir / "__init__.py").is_file():
        raise ScaffoldError(f"the entry point names the package {plugin.package!r}, but "
                            f"{plugin.package_dir / '__init__.py'} does not exist")
    return plugin


def _render(kind: str, plugin: PluginDir, name: str, module: str, description: str | None, into: Path) -> Path:
    """Render the ``kind`` template for this plugin and item into ``into``; the rendered project."""
    from cookiecutter.exceptions import CookiecutterException
    from cookiecutter.main import cookiecutter

    context = {"plugin_name": plugin.name, "__package_name": plugin.package, "__item_name": name,
               "__item_module": module, "author_name": "-"}  # the rendered pyproject and LICENSE are not used
    if description:
        context["description"] = description
    try:
        return Path(cookiecutter(str(template_dir(kind)), no_input=True, extra_context=context,
                                 output_dir=str(into), accept_hooks=False))
    except CookiecutterException as exc:
        raise ScaffoldError(f"cookiecutter failed: {type(exc).__name__}: {exc}") from exc


def _function(tree: ast.Module, hook: str) -> ast.FunctionDef | None:
    return next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == hook), None)


def _lines(source: str, node: ast.stmt, with_decorators: bool = False) -> list[str]:
    decorators = getattr(node, "decorator_list", []) if with_decorators else []
    start = min([node.lineno, *(decorator.lineno for decorator in decorators)])
    return source.splitlines()[start - 1:node.end_lineno]


def _registration(rendered_init: str, hook: str) -> tuple[list[str], list[str]]:
    """The rendered hook function (decorator to end) and its ``register(...)`` call, as lines."""
    tree = ast.parse(rendered_init)
    function = _function(tree, hook)
    if function is None or not function.body:
        raise ScaffoldError(f"the template's __init__.py has no {hook} function")
    call = function.body[-1]
    return _lines(rendered_init, function, with_decorators=True), _lines(rendered_init, call)


def _reindent(lines: list[str], indent: str) -> list[str]:
    current = len(lines[0]) - len(lines[0].lstrip())
    return [indent + line[current:] if line.strip() else line for line in lines]


def merged_init(existing: str, rendered: str, hook: str) -> str:
    """``existing`` (the plugin's ``__init__.py``) with the rendered item registered: its
    ``register(...)`` call appended to the existing ``hook`` function, or the whole rendered function
    appended to the module (with ``import vista_rl`` added if the module lacks it)."""
    function_lines, call_lines = _registration(rendered, hook)
    tree = ast.parse(existing)
    lines = existing.splitlines()
    function = _function(tree, hook)
    if function is not None:
        body_indent = lines[function.body[0].lineno - 1][:function.body[0].col_offset]
        end = function.end_lineno or function.lineno
        lines[end:end] = _reindent(call_lines, body_indent)
    else:
        imports_vista = any(isinstance(node, ast.Import) and any(alias.name == "vista_rl" for alias in node.names)
                            for node in tree.body)
        if not imports_vista:
            last_import = max((node.end_lineno or 0 for node in tree.body
                               if isinstance(node, (ast.Import, ast.ImportFrom))), default=0)
            lines[last_import:last_import] = ["import vista_rl"]
        while lines and not lines[-1].strip():
            lines.pop()
        lines += ["", "", *function_lines]
    merged = "\n".join(lines) + "\n"
    try:
        ast.parse(merged)
    except SyntaxError as exc:
        raise ScaffoldError(f"adding the {hook} registration would break __init__.py ({exc}); "
                            "add it by hand") from None
    return merged


def add_item(kind: str, name: str, plugin_dir: Path | str, *, description: str | None = None) -> AddedItem:
    """Add the ``kind`` template's example item, named ``name``, to the plugin project in
    ``plugin_dir``; return what was written.  Writes nothing if any part cannot be done."""
    if kind not in HOOKS:
        raise ScaffoldError(f"unknown kind {kind!r}; choose one of {', '.join(HOOKS)}")
    problem = item_name_problem(kind, name)
    if problem is not None:
        raise ScaffoldError(problem)
    if kind == "env" and VERSIONED.search(name):
        raise ScaffoldError(f"give the env's name without a version ({VERSIONED.sub('', name)!r}): its id gets -v0")
    plugin = read_plugin(Path(plugin_dir))
    item_id = f"{plugin.name}/{name}-v0" if kind == "env" else f"{plugin.name}/{name}"
    module_name = f"{name.replace('-', '_')}_{kind}"
    module = plugin.package_dir / f"{module_name}.py"
    test = plugin.root / "tests" / f"test_{module_name}.py"
    init = plugin.package_dir / "__init__.py"
    existing = init.read_text(encoding="utf-8")
    for path in (module, test):
        if path.exists():
            raise ScaffoldError(f"{path} already exists; choose another name")
    if f'"{item_id}"' in existing:
        raise ScaffoldError(f"{init} already registers {item_id}; choose another name")
    with tempfile.TemporaryDirectory(prefix="vista-new-") as scratch:
        rendered = _render(kind, plugin, name, module_name, description, Path(scratch))
        suffix = plugin.name.replace("-", "_")
        rendered_package = rendered.joinpath(*plugin.package.split("."))
        merged = merged_init(existing, (rendered_package / "__init__.py").read_text(encoding="utf-8"), HOOKS[kind])
        test.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rendered_package / f"{module_name}.py", module)
        shutil.copyfile(rendered / "tests" / f"test_{suffix}.py", test)
    init.write_text(merged, encoding="utf-8")
    return AddedItem(item_id, module, test, init)


def _dependency_note(kind: str, plugin: PluginDir) -> str | None:
    """The example env and tool draw with Pillow: say so when the plugin does not depend on it."""
    if kind == "judge":
        return None
    project = tomllib.loads((plugin.root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    if any(str(dependency).lower().startswith("pillow") for dependency in project.get("dependencies", [])):
        return None
    return 'Note: the example uses Pillow; add "pillow>=10" to [project] dependencies in pyproject.toml.'


def add_item_command(kind: str, name: str, plugin_dir: Path, description: str | None) -> None:
    """``vista new KIND NAME --into PLUGIN_DIR``: :func:`add_item`, with what was done and what next."""
    try:
        added = add_item(kind, name, plugin_dir, description=description)
        note = _dependency_note(kind, read_plugin(plugin_dir))
    except ScaffoldError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"Added {kind} {added.item_id} to {plugin_dir}:")
    click.echo(f"  {added.module}   (the example {kind}: replace it with yours)")
    click.echo(f"  {added.init}   ({HOOKS[kind]} registers {added.item_id})")
    click.echo(f"  {added.test}   (tests of the example: replace them with yours)")
    if note:
        click.echo(note)
    click.echo(f"Next: python -m pytest (the conformance test checks {added.item_id} too); "
               f"vista {kind}s lists it; describe it in README.md.")
