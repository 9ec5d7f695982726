"""The core package's modules must import each other without cycles, and the code outside the core
(plugins, contrib, SDK, templates, docs) may use only its public API.

Both are checked statically with :mod:`ast`, so no package code runs and every module is seen.
The public-API line is described in CONTRIBUTING.md ("Public API") and enforced at the end of this
file; the rest of this docstring is about cycles.

Why: a cycle works only while the import order happens to be right (someone moves a line and a
name is suddenly missing at import time), and it makes modules impossible to read or reuse alone.
The graph is built statically with :mod:`ast` from the source under ``core/vista_rl``, so the test
runs no package code and sees every module, also the ones no test imports.

Policy (decided here, on purpose):

* Every ``import vista_rl.x`` / ``from vista_rl.x import y`` / relative import counts, whether it
  sits at module level or inside a function, and also under ``if TYPE_CHECKING:``. A lazy import
  inside a function does not fail at import time, but it is still a dependency in both directions
  of the pair, and "it is imported lazily" is the usual way a cycle gets hidden rather than fixed.
* One exception exists (``vista_rl.train``/``evaluate``). Should a lazy import ever be the right design, add the pair to
  ``ALLOWED_LAZY`` with the reason next to it; module-level edges can never be allowed.
* ``from pkg import name`` points to ``pkg.name`` when that is a module, else to ``pkg``. The
  implicit import of parent packages (``vista_rl/__init__.py``) is not an edge: every module would
  otherwise depend on the package's re-export list, which is a façade, not a dependency.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.docblocks import code_blocks

CORE = Path(__file__).resolve().parents[1] / "core" / "vista_rl"
PACKAGE = "vista_rl"

# (importer, imported) pairs allowed as function-level imports, each with its reason.
ALLOWED_LAZY: dict[tuple[str, str], str] = {
    ("vista_rl", "vista_rl.api"): "vista_rl.train/evaluate run the rollout engine, which makes envs and models "
                                  "through the package's own make_env/make_model: the package can only reach it "
                                  "when called, and `import vista_rl` must not load the engine",
}


def module_names(root: Path = CORE, package: str = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` under ``root``."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _imports(module: str, path: Path, modules: dict[str, Path]) -> set[tuple[str, bool]]:
    """(imported core module, is function-level) for each import statement in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[tuple[str, bool]] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name in modules:
                        found.add((alias.name, nested))
            elif isinstance(child, ast.ImportFrom):
                base = (_resolve_relative(module, is_package, child.level, child.module)
                        if child.level else (child.module or ""))
                for alias in child.names:
                    candidate = f"{base}.{alias.name}"
                    if candidate in modules:
                        found.add((candidate, nested))
                    elif base in modules:
                        found.add((base, nested))
            visit(child, nested)

    visit(tree, False)
    return found


def import_graph(root: Path = CORE, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the core modules it imports (self-imports dropped, allowed lazy edges dropped)."""
    modules = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = {
            target for target, lazy in _imports(module, path, modules)
            if target != module and not (lazy and (module, target) in ALLOWED_LAZY)
        }
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One example cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0

    def strongconnect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                strongconnect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: set[str] = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    return [_cycle_in(component, graph) for component in components]


def _cycle_in(component: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A concrete path start -> ... -> start inside one strongly connected component (BFS)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start] if node != start else [start, start]
                if target not in parents:
                    parents[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(component)}")  # pragma: no cover


def test_graph_sees_core_imports() -> None:
    """Guards the test itself: a graph builder that found nothing would pass vacuously."""
    graph = import_graph()
    assert "vista_rl.store.writer" in graph
    assert "vista_rl.trajectory" in graph["vista_rl.store.writer"]
    assert sum(len(targets) for targets in graph.values()) > len(graph)


def test_find_cycles_reports_a_cycle(tmp_path: Path) -> None:
    """Module-level, lazy (in-function) and relative imports all close a cycle."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import X\n")
    (pkg / "c.py").write_text("import pkg.a\nX = 1\n")
    (pkg / "d.py").write_text("from pkg import a\n")
    cycles = find_cycles(import_graph(pkg, "pkg"))
    assert cycles == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]


def test_core_has_no_import_cycles() -> None:
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles in core/vista_rl:\n" + "\n".join(" -> ".join(c) for c in cycles)


# ----------------------------------------------------------------------------- the public API line
# What first-party plugins, contrib plugins, the SDK, the cookiecutter templates and the docs' code may
# import from the core (CONTRIBUTING.md, "Public API"): the names in ``vista_rl.__all__`` and these
# documented subpackages/modules with their public names.  Every other core module is internal, and
# a module or name starting with ``_`` is private everywhere.
REPO = CORE.parents[1]
PUBLIC_MODULES = frozenset({
    "vista_rl",
    "vista_rl.hookspecs",
    "vista_rl.config",
    "vista_rl.cli",
    "vista_rl.rollout",
    "vista_rl.store",
    "vista_rl.engine_contract",
    "vista_rl.serving",
    "vista_rl.limits",  # what one request may cost a server: image budgets, JSON value bound, memory release
    "vista_rl.model_paths",
    "vista_rl.baselines",  # blind baselines and the main-job verdict any engine's main job reports
    "vista_rl.chat_render",  # the one chat layout RL, SFT and serving share
    "vista_rl.audit",  # the reward audit (audit_rewards, its report, the adversaries), for plugins' own tests
    "vista_rl.step_seeds",  # the seeds each RL step trains on, one rule for every engine
    "vista_rl.algorithms.turn_credit",  # per-turn rows' advantages, one rule for every engine
})
CONSUMERS = ("plugins/*/*/**/*.py", "contrib/*/**/*.py", "sdk/**/*.py", "templates/**/*.py")
DOC_PAGES = ("README.md", "CONTRIBUTING.md", "docs/**/*.md", "plugins/*/*/README.md", "contrib/*/README.md",
             "sdk/README.md", "templates/**/*.md")
_JINJA = re.compile(r"{{.*?}}|{%.*?%}")


def public_names(module: str, modules: dict[str, Path] | None = None) -> set[str]:
    """A public module's public names: its ``__all__`` when it has one, else every top-level name
    without a leading underscore; plus its public submodules."""
    modules = modules or module_names()
    tree = ast.parse(modules[module].read_text(encoding="utf-8"))
    names: set[str] = set()
    declared: set[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            declared = {elt.value for elt in ast.walk(node.value)
                        if isinstance(elt, ast.Constant) and isinstance(elt.value, str)}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    result = declared if declared is not None else {name for name in names if not name.startswith("_")}
    submodules = {name.rpartition(".")[2] for name in PUBLIC_MODULES if name.rpartition(".")[0] == module}
    return result | submodules | ({"__version__"} if module == PACKAGE else set())


def api_violations(source: str, where: str, modules: dict[str, Path] | None = None) -> list[str]:
    """Each use of the core in ``source`` that crosses the public API line, as ``where: what``."""
    modules = modules or module_names()
    tree = ast.parse(source)
    found: list[str] = []
    bound: dict[str, str] = {}  # local name -> core module it is bound to by ``import``

    def check_module(module: str, line: int) -> bool:
        if any(part.startswith("_") for part in module.split(".")):
            found.append(f"{where}:{line}: imports private module {module}")
            return False
        if module not in PUBLIC_MODULES:
            found.append(f"{where}:{line}: imports internal module {module} (not in the public API)")
            return False
        return True

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                core = alias.name == PACKAGE or alias.name.startswith(f"{PACKAGE}.")
                if core and check_module(alias.name, node.lineno):
                    # ``import vista_rl.x as y`` binds y to vista_rl.x; ``import vista_rl.x`` binds vista_rl
                    bound[alias.asname or PACKAGE] = alias.name if alias.asname else PACKAGE
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None and (
                node.module == PACKAGE or node.module.startswith(f"{PACKAGE}.")):
            if not check_module(node.module, node.lineno):
                continue
            allowed = public_names(node.module, modules)
            for alias in node.names:
                if alias.name not in allowed:
                    found.append(f"{where}:{node.lineno}: imports {alias.name} from {node.module}, "
                                 "which is not part of its public API")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            module = bound[node.value.id]
            if node.attr not in public_names(module, modules):
                found.append(f"{where}:{node.lineno}: uses {module}.{node.attr}, which is not part of its public API")
    return found


def _consumer_sources() -> list[tuple[str, str]]:
    sources = []
    for pattern in CONSUMERS:
        for path in sorted(REPO.glob(pattern)):
            if "/build/" in path.as_posix() or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8")
            # Only cookiecutter templates hold Jinja; elsewhere ``{{`` is an f-string's literal brace.
            where = str(path.relative_to(REPO))
            sources.append((where, _JINJA.sub("X", text) if where.startswith("templates/") else text))
    for pattern in DOC_PAGES:
        for page in sorted(REPO.glob(pattern)):
            for number, block in enumerate(code_blocks(page), 1):
                try:
                    ast.parse(block)
                except SyntaxError:
                    continue  # a fragment (``...``-elided), not a program
                sources.append((f"{page.relative_to(REPO)} (python block {number})", block))
    return sources


def test_public_api_checker_finds_violations() -> None:
    """Guards the check itself: each kind of crossing is caught, and public uses pass."""
    source = (
        "import vista_rl\nimport vista_rl._plugins\nfrom vista_rl.plugins_gone import x\n"
        "from vista_rl._registry import ItemSpec\nfrom vista_rl.observation import Message\n"
        "from vista_rl import Env, _host\nfrom vista_rl.config import RunConfig\n"
        "from vista_rl.engine_contract import EnginePlan\nfrom vista_rl.cli import main\n"
        "vista_rl.make_env('x')\nvista_rl.registry\n"
    )
    found = "\n".join(api_violations(source, "m.py"))
    assert "m.py:2: imports private module vista_rl._plugins" in found
    assert "m.py:3: imports internal module vista_rl.plugins_gone" in found
    assert "m.py:4: imports private module vista_rl._registry" in found
    assert "m.py:5: imports internal module vista_rl.observation" in found
    assert "m.py:6: imports _host from vista_rl" in found
    assert "m.py:11: uses vista_rl.registry" in found
    assert found.count("\n") == 5, found  # exactly these six: the public uses are fine


def test_every_public_api_name_exists() -> None:
    """``__all__`` of the package names only things it defines or imports."""
    import vista_rl

    assert all(hasattr(vista_rl, name) for name in vista_rl.__all__)
    for module in PUBLIC_MODULES:
        assert module in module_names(), f"{module} is listed as public but does not exist"


def test_first_party_code_uses_only_the_public_api() -> None:
    sources = _consumer_sources()
    assert len(sources) > 100 and any("templates/" in where for where, _ in sources)
    assert any("python block" in where for where, _ in sources)
    modules = module_names()
    violations = [v for where, source in sources for v in api_violations(source, where, modules)]
    assert not violations, "imports across the public API line (see CONTRIBUTING.md, Public API):\n" + "\n".join(
        violations)


def test_public_api_check_sees_every_plugin_and_kit() -> None:
    """Guards the consumer globs against a re-layout of ``plugins/`` (issue 34 grouped it by kind): every
    plugin project, kits included, must have its package among the checked sources."""
    sources = {where for where, _ in _consumer_sources()}
    projects = sorted(path.parent for path in REPO.glob("plugins/*/*/pyproject.toml"))
    assert len(projects) >= 20
    unseen = [str(p.relative_to(REPO)) for p in projects
              if not any(where.startswith(f"{p.relative_to(REPO)}/vista_plugin_") for where in sources)]
    assert not unseen, f"the public-API check does not read these plugins (fix CONSUMERS): {unseen}"
    assert "plugins/kits/scenekit/vista_plugin_scenekit/markers.py" in sources
