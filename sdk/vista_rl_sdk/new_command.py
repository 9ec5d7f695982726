"""``vista new KIND NAME``: a new plugin from a template (:mod:`vista_rl_sdk.scaffold`), or with
``--into PLUGIN_DIR`` one more item in an existing plugin (:mod:`vista_rl_sdk.add_item`).  The command
lives apart from both so that neither imports the other."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from vista_rl_sdk.add_item import add_item_command
from vista_rl_sdk.first_party import first_party_target, into_problem, new_first_party_plugin
from vista_rl_sdk.scaffold import KINDS, ScaffoldError, git_config, new_plugin


def _interactive() -> bool:
    """Whether a person can answer a prompt (stdin is a terminal)."""
    return sys.stdin.isatty()


def _author(author: str | None) -> str | None:
    """The author to use: ``--author``, else asked for in a terminal (git's user.name as the default),
    else git's user.name (``None`` leaves that to :func:`new_plugin`)."""
    if author is not None:
        return author
    if _interactive():
        default = git_config("user.name")
        return str(click.prompt("Author (for pyproject.toml and the LICENSE)", default=default or None))
    return None


NEXT_STEPS = """Next steps:
  cd {project}
  pip install -e ".[test]"
  python -m pytest           # conformance checks (vista-rl-sdk) and the example's tests
                             # (tests/test_*.py test the example: replace them when you replace it)
  ruff check .               # the lint the generated CI runs
  {listing:<26} # shows your {kind}
  vista new judge|tool|env ITEM --into {project}   # add an item later"""

FIRST_PARTY_NEXT_STEPS = """Next steps (a first-party plugin of this checkout, at {project}):
  .venv/bin/pip install -e {project}
  add "{distribution}" to FIRST_PARTY_DISTRIBUTIONS in core/vista_rl/_providers.py
  .venv/bin/python -m pytest {project}   # conformance checks and the example's tests
  .venv/bin/ruff check {project}
  {listing:<26} # shows your {kind}
  vista new judge|tool|env ITEM --into {project}   # add an item later"""


@click.command("new")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("name")
@click.option("--output-dir", "-o", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Where to create vista-plugin-NAME/; in a VISTA checkout (its root or "
                                      "plugins/) the plugin goes to plugins/KIND/NAME instead.")
@click.option("--into", "into", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              metavar="PLUGIN_DIR", help="Add the item NAME to this existing plugin instead of creating one: "
                                         "its module, its register line and a test.")
@click.option("--description", default=None, help="One line for the README and package metadata.")
@click.option("--author", default=None, help="Your name, for pyproject.toml and the LICENSE "
                                             "(default: asked in a terminal, else git config user.name).")
@click.option("--email", default=None, help="Your e-mail, for pyproject.toml (default: git config user.email).")
def new_command(kind: str, name: str, output_dir: Path, into: Path | None, description: str | None,
                author: str | None, email: str | None) -> None:
    """Create a plugin package vista-plugin-NAME from the KIND template (env, tool or judge), or with
    --into PLUGIN_DIR add an item NAME of that kind to an existing plugin.

    NAME is lower-case with hyphens, e.g. count-objects; for a new plugin it becomes the entry-point
    name and the namespace of the plugin's ids, for an added item the part of its id after the
    namespace (an env NAME gets -v0).
    """
    if into is not None:
        problem = into_problem(kind, into)
        if problem is not None:
            raise click.ClickException(problem)
        add_item_command(kind, name, into, description)
        return
    try:
        target = first_party_target(kind, name, output_dir)
        who = _author(author)
        if target is not None:
            project = new_first_party_plugin(kind, name, target, author=who, email=email, description=description)
        else:
            project = new_plugin(kind, name, output_dir, author=who, email=email, description=description)
    except ScaffoldError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"Created {project}")
    if target is not None:
        relative = project.relative_to(project.parents[2]).as_posix()
        click.echo(FIRST_PARTY_NEXT_STEPS.format(project=relative, distribution=f"vista-plugin-{name}",
                                                 listing=f"vista {kind}s", kind=kind))
    else:
        click.echo(NEXT_STEPS.format(project=project, listing=f"vista {kind}s", kind=kind))
