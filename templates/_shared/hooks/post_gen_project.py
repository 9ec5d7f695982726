"""Remove byte-code caches from the new project.

pip compiles every ``.py`` file of the installed vista-rl-sdk wheel, the template files included, and
cookiecutter copies whatever it finds; a generated project should start clean.
"""

from __future__ import annotations

import shutil
from pathlib import Path

if __name__ == "__main__":
    for cache in sorted(Path.cwd().rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache, ignore_errors=True)
