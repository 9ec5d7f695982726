"""``vista new env|tool|judge NAME``: generate a plugin package from the cookiecutter templates.

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
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import click

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


def name_problem(kind: str, name: str) -> str | None:
    """Ask the template's own ``pre_gen_project`` hook whether ``name`` is acceptable, so the
    naming rule lives in one place and ``vista new`` can refuse before cookiecutter starts."""
    hook = template_dir(kind) / "hooks" / "pre_gen_project.py"
    spec = importlib.util.spec_from_file_location("vista_template_pre_gen_project", hook)
    if spec is None or spec.loader is None:
        raise ScaffoldError(f"cannot load the template hook {hook}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check = cast(Callable[[str], "str | None"], module.problem_with)
    return check(name)


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
    description: str | None = None,
    extra_context: dict[str, Any] | None = None,
) -> Path:
    """Generate ``vista-plugin-<name>/`` under ``output_dir`` from the ``kind`` template and
    return its path.  The generated project depends on the running VISTA's release series."""
    from cookiecutter.exceptions import CookiecutterException, FailedHookException, OutputDirExistsException
    from cookiecutter.main import cookiecutter

    template = template_dir(kind)
    problem = name_problem(kind, name)
    if problem is not None:
        raise ScaffoldError(problem)
    context: dict[str, Any] = {"plugin_name": name}
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


NEXT_STEPS = """Next steps:
  cd {project}
  pip install -e ".[test]"
  python -m pytest           # conformance checks (vista-rl-sdk) and the example's tests
                             # (tests/test_*.py test the example: replace them when you replace it)
  {listing:<26} # shows your {kind}"""


@click.command("new")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("name")
@click.option("--output-dir", "-o", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where to create vista-plugin-NAME/.")
@click.option("--description", default=None, help="One line for the README and package metadata.")
def new_command(kind: str, name: str, output_dir: Path, description: str | None) -> None:
    """Create a plugin package vista-plugin-NAME from the KIND template (env, tool or judge).

    NAME is lower-case with hyphens, e.g. count-objects; it becomes the entry-point name and the
    namespace of the plugin's ids.
    """
    try:
        project = new_plugin(kind, name, output_dir, description=description)
    except ScaffoldError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"Created {project}")
    click.echo(NEXT_STEPS.format(project=project, listing=f"vista {kind}s", kind=kind))
