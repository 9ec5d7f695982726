"""The core package's modules must import each other without cycles.

Why: a cycle works only while the import order happens to be right (someone moves a line and a
name is suddenly missing at import time), and it makes modules impossible to read or reuse alone.
The graph is built statically with :mod:`ast` from the source under ``core/vista_rl``, so the test
runs no package code and sees every module, also the ones no test imports.

Policy (decided here, on purpose):

* Every ``import vista_rl.x`` / ``from vista_rl.x import y`` / relative import counts, whether it
  sits at module level or inside a function, and also under ``if TYPE_CHECKING:``. A lazy import
  inside a function does not fail at import time, but it is still a dependency in both directions
  of the pair, and "it is imported lazily" is the usual way a cycle gets hidden rather than fixed.
* No exceptions exist today. Should a lazy import ever be the right design, add the pair to
  ``ALLOWED_LAZY`` with the reason next to it; module-level edges can never be allowed.
* ``from pkg import name`` points to ``pkg.name`` when that is a module, else to ``pkg``. The
  implicit import of parent packages (``vista_rl/__init__.py``) is not an edge: every module would
  otherwise depend on the package's re-export list, which is a façade, not a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "core" / "vista_rl"
PACKAGE = "vista_rl"

# (importer, imported) pairs allowed as function-level imports, each with its reason. Empty on purpose.
ALLOWED_LAZY: dict[tuple[str, str], str] = {}


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
