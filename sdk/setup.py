"""Ship the repository's plugin templates inside the vista-rl-sdk wheel (as ``vista_rl_sdk/templates``).

The templates live at the top of the repository (``templates/``) where contributors edit them; a
plain ``pip install vista-rl-sdk`` has no checkout, so ``build_py`` copies them into the package and
``sdist`` carries them along.  An editable install needs no copy: ``vista_rl_sdk.scaffold`` finds the
checkout's ``templates/`` next to ``sdk/``.  All metadata stays in pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
KINDS = ("env", "tool", "judge")


def templates_source() -> Path | None:
    """``templates/`` inside an unpacked sdist, else the checkout's top-level ``templates/``."""
    for candidate in (HERE / "templates", HERE.parent / "templates"):
        if all((candidate / kind / "cookiecutter.json").is_file() for kind in KINDS):
            return candidate
    return None


def copy_templates(destination: Path) -> None:
    source = templates_source()
    if source is None:
        raise SystemExit("vista-rl-sdk build: the plugin templates (templates/env, tool, judge) were not found")
    if destination.exists():
        shutil.rmtree(destination)
    for kind in KINDS:
        # symlinks=False: files shared between the templates (templates/_shared) are copied as files.
        shutil.copytree(source / kind, destination / kind, symlinks=False,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


class BuildWithTemplates(build_py):
    def run(self) -> None:
        super().run()
        if not getattr(self, "editable_mode", False):
            copy_templates(Path(self.build_lib) / "vista_rl_sdk" / "templates")


class SdistWithTemplates(sdist):
    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        copy_templates(Path(base_dir) / "templates")


setup(cmdclass={"build_py": BuildWithTemplates, "sdist": SdistWithTemplates})
