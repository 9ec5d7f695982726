"""Refuse a plugin name, item name or author that would make a broken or confusing package, before
any file is written.

cookiecutter renders this file with Jinja and runs it as ``pre_gen_project``; a non-zero exit makes
it delete the half-made project.  ``vista new`` (``vista_rl_sdk.scaffold``) imports the same file and
calls :func:`problem_with`, :func:`item_problem` and :func:`author_problem` first, so the rules live
in this one place.
"""

from __future__ import annotations

import json
import re
import sys

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
MAX_LENGTH = 40
#: Entry-point names VISTA itself uses; a plugin with one of them would shadow the core's.
RESERVED = frozenset({"vista", "sdk", "core", "builtin", "plugin", "test"})
PREFIXES = ("vista-plugin-", "vista_plugin_", "vista-", "vista_")


def suggest(name: str) -> str:
    """A valid name close to ``name`` (lower-case, hyphens, no VISTA prefix)."""
    text = name.strip().lower()
    for prefix in PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    text = re.sub(r"^[0-9-]+", "", text)
    return text[:MAX_LENGTH].rstrip("-") or "my-plugin"


def problem_with(name: str) -> str | None:
    """Why ``name`` cannot be a plugin name, or ``None`` when it can."""
    if not name.strip():
        return "the plugin name is empty; give a short lower-case name such as 'count-objects'."
    if name.lower().startswith(PREFIXES):
        return (f"{name!r} starts with a VISTA prefix; give the bare name, e.g. {suggest(name)!r}: "
                "the distribution is called 'vista-plugin-<name>' and the package "
                "'vista_plugin_<name>' for you.")
    if name in RESERVED:
        return f"{name!r} is reserved by VISTA itself; choose a more specific name, e.g. '{name}-extra'."
    if len(name) > MAX_LENGTH:
        return f"{name!r} is {len(name)} characters long; keep it to {MAX_LENGTH} or fewer."
    if not NAME_PATTERN.match(name):
        return (f"{name!r} is not a valid plugin name: use lower-case letters, digits and single "
                f"hyphens, starting with a letter, e.g. {suggest(name)!r}.")
    return None


def item_problem(name: str) -> str | None:
    """Why ``name`` cannot name an item (the part of an id after ``plugin/``), or ``None``."""
    if not NAME_PATTERN.match(name) or len(name) > MAX_LENGTH:
        return (f"{name!r} is not a valid item name: use lower-case letters, digits and single hyphens, "
                f"starting with a letter, at most {MAX_LENGTH} characters, e.g. {suggest(name)!r}.")
    return None


def author_problem(author: str) -> str | None:
    """Why ``author`` cannot be the package's author, or ``None``: the name goes into pyproject.toml
    and the LICENSE, so a placeholder or nothing is refused."""
    if not author.strip():
        return ("the author's name is empty: give it (vista new --author NAME, or author_name when running "
                "cookiecutter); it goes into pyproject.toml and the LICENSE.")
    if any(ord(character) < 32 for character in author):
        return f"the author's name {author!r} holds a control character (a line break?); give one line."
    return None


if __name__ == "__main__":
    problems = [
        problem_with(json.loads(r'{{ cookiecutter.plugin_name | tojson }}')),
        item_problem(json.loads(r'{{ cookiecutter.__item_name | tojson }}')),
        author_problem(json.loads(r'{{ cookiecutter.author_name | tojson }}')),
    ]
    for problem in problems:
        if problem is not None:
            print(f"ERROR: {problem}", file=sys.stderr)
    if any(problems):
        sys.exit(1)
