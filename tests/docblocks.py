"""Code blocks of the Markdown docs, for the tests that keep the docs true.

The hook pages give each ```python block a first line ``# package/module.py`` naming the file it
belongs to; :func:`materialize` writes those files so an example plugin can be imported for real
(lazy ``"module:Object"`` targets included).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^```\s*$", re.MULTILINE | re.DOTALL)
FILE_HEADER = re.compile(r"^# (?P<path>[\w/]+\.py)\s*$")


def code_blocks(markdown: Path, language: str = "python") -> list[str]:
    return [m.group("body") for m in FENCE.finditer(markdown.read_text()) if m.group("lang") == language]


def materialize(markdown: Path, folder: Path) -> str:
    """Write the page's ``# path.py`` blocks under ``folder``; return the package they form."""
    packages = set()
    for block in code_blocks(markdown):
        header = FILE_HEADER.match(block.splitlines()[0]) if block.strip() else None
        if header is None:
            raise ValueError(f"{markdown.name}: a python block does not start with '# package/module.py'")
        target = folder / header.group("path")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block)
        packages.add(header.group("path").split("/")[0])
    if len(packages) != 1:
        raise ValueError(f"{markdown.name}: the examples must form exactly one package, found {sorted(packages)}")
    return packages.pop()
