"""No import cycles inside any distribution: the SDK, every first-party plugin and every contrib plugin.

The same static graph and policy as the core's check in :mod:`tests.test_import_graph` (every import
counts, module-level or in a function, also under ``TYPE_CHECKING``), applied to each package on its
own: a cycle between two modules of one plugin hides the same way a core one does (the toolserve
proxy imported its maker lazily to close itself, and the maker imported the proxy).
"""

from __future__ import annotations

from pathlib import Path

import pytest

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
