"""Telling a model path from a model-hub id, so a typo fails at once instead of after hub retries.

``transformers:runs/tiny-typo`` and ``transformers:Qwen/Qwen2.5-VL-3B-Instruct`` have the same
shape.  The rule, like pip's for requirement strings (``./pkg`` is a path, ``pkg`` a name):
a spec is a *path* when it starts with ``/``, ``.`` or ``~``, holds a backslash, ends with a
separator, has more than one ``/`` (hub ids are exactly ``namespace/name``), or when its first
component is a directory here (``runs/`` exists, so ``runs/tiny-typo`` means a run directory).  A
path that does not exist is an error on the spot; only the rest may go to a hub.
"""

from __future__ import annotations

from pathlib import Path

from vista_rl.errors import VistaError


class ModelPathError(VistaError, FileNotFoundError):
    """A model spec names a local path that does not exist, or a hub id that cannot be loaded."""


def looks_like_path(spec: str) -> bool:
    """True when ``spec`` can only mean a local path (see the module docstring); URLs are not."""
    if not spec or "://" in spec:
        return False
    if spec.startswith(("/", ".", "~")) or "\\" in spec or spec.endswith("/"):
        return True
    parts = spec.split("/")
    if len(parts) > 2:
        return True
    return len(parts) == 2 and Path(parts[0]).is_dir()


def check_model_path(spec: str | None) -> None:
    """Raise :class:`ModelPathError` when ``spec`` is path-like and nothing exists there."""
    if spec and looks_like_path(spec) and not Path(spec).expanduser().exists():
        parent = Path(spec).expanduser().parent
        hint = ""
        if parent.is_dir():
            near = sorted(p.name for p in parent.iterdir() if p.is_dir())[:8]
            hint = f"; {parent} holds: {', '.join(near)}" if near else f"; {parent} is empty"
        raise ModelPathError(f"{spec} does not exist (give a model directory, a file, or a URL{hint})")
