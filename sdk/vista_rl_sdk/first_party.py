"""Where ``vista new`` puts a plugin inside a VISTA checkout: ``plugins/KIND/NAME``.

Why: ``plugins/`` is grouped by kind (envs, engines, backends, tools, judges, servers, kits), and
``tests/test_plugin_import_cycles.py`` fails on a plugin anywhere else.  So when ``--output-dir`` is
a checkout's root or its ``plugins/`` folder, a new env goes to ``plugins/envs/NAME`` (a tool to
``plugins/tools/``, a judge to ``plugins/judges/``), named as the first-party plugins are (the folder
is the package's suffix: ``maze-run`` -> ``plugins/envs/maze_run``, package ``vista_plugin_maze_run``,
distribution ``vista-plugin-maze-run``), without the stand-alone repository's CI workflows (the
checkout's CI runs its tests), and with a README whose Development section says how it is set up
there.  Anywhere else ``vista new`` makes a stand-alone ``vista-plugin-NAME/`` as before.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from vista_rl_sdk.scaffold import ScaffoldError, new_plugin

#: The plugins/ folder each kind ``vista new`` makes goes to.
KIND_FOLDERS: dict[str, str] = {"env": "envs", "tool": "tools", "judge": "judges"}


def is_checkout(root: Path) -> bool:
    """Whether ``root`` is the top of a VISTA source checkout (the core's package and ``plugins/``)."""
    return (root / "core" / "vista_rl" / "__init__.py").is_file() and (root / "plugins").is_dir()


def folder_name(name: str) -> str:
    """The folder of plugin ``name`` under its kind: the suffix of its package name."""
    return name.replace("-", "_")


def first_party_target(kind: str, name: str, output_dir: Path) -> Path | None:
    """``plugins/KIND/NAME`` of the checkout ``output_dir`` names (its root, ``plugins/`` or the kind's
    own folder), else ``None`` (a stand-alone project).  A kind folder that does not fit ``kind`` and a
    name some plugin of the checkout already has are refused."""
    out = output_dir.resolve()
    if is_checkout(out):
        plugins = out / "plugins"
    elif out.name == "plugins" and is_checkout(out.parent):
        plugins = out
    elif out.parent.name == "plugins" and is_checkout(out.parent.parent):
        plugins = out.parent
        if out.name != KIND_FOLDERS[kind]:
            raise ScaffoldError(f"a new {kind} goes under plugins/{KIND_FOLDERS[kind]}/, not plugins/{out.name}/: "
                                "give --output-dir plugins and vista new picks the kind's folder")
    else:
        return None
    folder = folder_name(name)
    taken = sorted(p for p in plugins.glob(f"*/{folder}") if p.is_dir())
    if taken:
        raise ScaffoldError(f"{taken[0]} already exists (vista-plugin-{name} would be its distribution); "
                            "choose another name")
    return plugins / KIND_FOLDERS[kind] / folder


def new_first_party_plugin(kind: str, name: str, target: Path, *, author: str | None = None,
                           email: str | None = None, description: str | None = None) -> Path:
    """Render the ``kind`` template as the first-party plugin ``target`` (``plugins/KIND/NAME``), with
    :func:`vista_rl_sdk.scaffold.new_plugin`'s options.  Nothing is left behind when rendering fails."""
    relative = target.relative_to(target.parents[2]).as_posix()  # plugins/KIND/NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".vista-new-", dir=target.parent))
    try:
        project = new_plugin(kind, name, staging, author=author, email=email, description=description,
                             extra_context={"__first_party": relative})
        shutil.rmtree(project / ".github", ignore_errors=True)  # the checkout's CI runs its tests
        project.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def into_problem(kind: str, plugin_dir: Path) -> str | None:
    """Why ``vista new KIND ITEM --into plugin_dir`` would break the checkout's layout, or ``None``: a
    kit registers nothing, and an env belongs in a plugin under ``plugins/envs/`` (a tool or judge may
    go into any plugin: an env's own judge or tool lives with it)."""
    folder = plugin_dir.resolve()
    plugins = folder.parent.parent
    if plugins.name != "plugins" or not is_checkout(plugins.parent):
        return None
    where = f"plugins/{folder.parent.name}/{folder.name}"
    if folder.parent.name == "kits":
        return (f"{where} is a kit, and a kit registers nothing: add the {kind} to a plugin that uses the kit, "
                f"or create one with `vista new {kind} NAME --output-dir plugins`")
    if kind == "env" and folder.parent.name != "envs":
        return (f"an env goes under plugins/envs/, and {where} is not there: add it to an env plugin "
                "(--into plugins/envs/NAME) or create one with `vista new env NAME --output-dir plugins`")
    return None
