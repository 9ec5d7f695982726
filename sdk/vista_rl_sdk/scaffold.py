"""``vista new env|tool|judge NAME``: generate a plugin package from the cookiecutter templates, or
(``--into PLUGIN_DIR``) add one more item to a plugin made that way (:mod:`vista_rl_sdk.add_item`).

Why cookiecutter and not strings in code: the templates are plain files a contributor can read and
change, users can also run them with ``cookiecutter`` directly, and the template tests bake them
exactly as users do.

Where the templates are found (first hit wins):

1. ``$VISTA_TEMPLATES_DIR`` (a folder holding ``env/``, ``tool/``, ``judge/``), to try edited templates;
2. ``vista_rl_sdk/templates`` inside the installed package: the wheel build copies the repository's
   ``templates/`` there (see ``sdk/setup.py``), so ``pip install vista-rl-sdk`` alone is enough;
3. ``templates/`` of the source checkout an editable install points into.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, cast

KINDS: tuple[str, ...] = ("env", "tool", "judge")
TEMPLATES_DIR_VARIABLE = "VISTA_TEMPLATES_DIR"


class ScaffoldError(Exception):
    """A plugin could not be generated; the message says why and what to do."""


def _has_templates(folder: Path) -> bool:
    return all((folder / kind / "cookiecutter.json").is_file() for kind in KINDS)


def templates_root() -> Path:
    """The folder holding the ``env``, ``tool`` and ``judge`` templates."""
    override = os.environ.get(TEMPLATES_DIR_VARIABLE)
    if override:
        folder = Path(override).expanduser()
        if not _has_templates(folder):
            raise ScaffoldError(f"{TEMPLATES_DIR_VARIABLE}={override} does not hold the templates "
                                f"{', '.join(KINDS)} (each with a cookiecutter.json)")
        return folder
    package = Path(__file__).resolve().parent
    for candidate in (package / "templates", package.parent.parent / "templates"):
        if _has_templates(candidate):
            return candidate
    raise ScaffoldError("the plugin templates were not found: reinstall vista-rl-sdk "
                        f"(pip install --force-reinstall vista-rl-sdk) or set {TEMPLATES_DIR_VARIABLE}")


def template_dir(kind: str) -> Path:
    if kind not in KINDS:
        raise ScaffoldError(f"unknown template {kind!r}; choose one of {', '.join(KINDS)}")
    return templates_root() / kind


def _template_hook(kind: str) -> ModuleType:
    """The template's own ``pre_gen_project`` hook, imported, so the rules for names and authors live
    in one place and ``vista new`` can refuse before cookiecutter starts."""
    hook = template_dir(kind) / "hooks" / "pre_gen_project.py"
    spec = importlib.util.spec_from_file_location("vista_template_pre_gen_project", hook)
    if spec is None or spec.loader is None:
        raise ScaffoldError(f"cannot load the template hook {hook}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ask_hook(kind: str, rule: str, value: str) -> str | None:
    check = cast(Callable[[str], "str | None"], getattr(_template_hook(kind), rule))
    return check(value)


def name_problem(kind: str, name: str) -> str | None:
    """Why ``name`` cannot be a plugin name (the template hook's rule), or ``None``."""
    return _ask_hook(kind, "problem_with", name)


def item_name_problem(kind: str, name: str) -> str | None:
    """Why ``name`` cannot name an item (the part of its id after ``plugin/``), or ``None``."""
    return _ask_hook(kind, "item_problem", name)


def author_problem(kind: str, author: str) -> str | None:
    """Why ``author`` cannot be the package's author (empty, several lines), or ``None``."""
    return _ask_hook(kind, "author_problem", author)


def git_config(key: str) -> str:
    """``git config --get key`` (``user.name``, ``user.email``), or ``""`` without git or the key: the
    default author of a new plugin."""
    try:
        done = subprocess.run(["git", "config", "--get", key], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def compatible_requirement(distribution: str, version: str) -> str:
    """Floor and ceiling on the release series: ``0.1.3`` gives ``>=0.1,<0.2`` (0.x breaks in
    minor releases), ``1.4.0`` gives ``>=1.4,<2``."""
    parts = [int(part) for part in version.split(".")[:2] if part.isdigit()]
    if len(parts) < 2:
        raise ScaffoldError(f"cannot derive a version range for {distribution} from version {version!r}")
    major, minor = parts
    ceiling = f"{major}.{minor + 1}" if major == 0 else f"{major + 1}"
    return f"{distribution}>={major}.{minor},<{ceiling}"


def _installed_requirement(distribution: str) -> str | None:
    try:
        return compatible_requirement(distribution, metadata.version(distribution))
    except (metadata.PackageNotFoundError, ScaffoldError):
        return None


def new_plugin(
    kind: str,
    name: str,
    output_dir: Path | str = ".",
    *,
    author: str | None = None,
    email: str | None = None,
    description: str | None = None,
    extra_context: dict[str, Any] | None = None,
) -> Path:
    """Generate ``vista-plugin-<name>/`` under ``output_dir`` from the ``kind`` template and
    return its path.  The generated project depends on the running VISTA's release series.
    ``author`` and ``email`` default to ``git config user.name`` / ``user.email``; an empty author is
    refused (it goes into pyproject.toml and the LICENSE)."""
    from cookiecutter.exceptions import CookiecutterException, FailedHookException, OutputDirExistsException
    from cookiecutter.main import cookiecutter

    template = template_dir(kind)
    author = git_config("user.name") if author is None else author
    email = git_config("user.email") if email is None else email
    for problem in (name_problem(kind, name), author_problem(kind, author)):
        if problem is not None:
            raise ScaffoldError(problem)
    context: dict[str, Any] = {"plugin_name": name, "author_name": author, "author_email": email}
    for key, distribution in (("vista_requirement", "vista-rl"), ("sdk_requirement", "vista-rl-sdk")):
        requirement = _installed_requirement(distribution)
        if requirement is not None:
            context[key] = requirement
    if description:
        context["description"] = description
    context.update(extra_context or {})
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    try:
        project = cookiecutter(str(template), no_input=True, extra_context=context, output_dir=str(output))
    except OutputDirExistsException as exc:
        raise ScaffoldError(f"{output / ('vista-plugin-' + name)} already exists; choose another name "
                            "or --output-dir") from exc
    except FailedHookException as exc:
        raise ScaffoldError(f"the {kind} template refused the input (see the message above): {exc}") from exc
    except CookiecutterException as exc:
        raise ScaffoldError(f"cookiecutter failed: {type(exc).__name__}: {exc}") from exc
    return Path(project)
