"""Paths a release file names, confined to their declared root: one rule, one place.

Its own module so that both the adapters' helpers (:mod:`~vista_plugin_datasets.common`) and the
generic loader (:mod:`~vista_plugin_datasets.records`) use it without importing each other.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath


class PathRefused(ValueError):
    """A record names a file outside its declared root (an absolute path, a ``..`` step or a
    symlink that leads out).  Release files are data from whoever published them: a record must not
    make us read ``/etc/passwd`` or copy it into the converted tree.  Carries the record's id so
    the refusal is reported per record (the record is skipped, the run goes on)."""

    def __init__(self, record_id: str, path: str, root: str | Path, why: str) -> None:
        super().__init__(f"record {record_id}: path {path!r} {why} (root {root}); record skipped")
        self.record_id = record_id
        self.path = path


def resolve_inside(root: str | Path, relative: str | Path, record_id: str) -> Path:
    """``root / relative`` for a path a record names, refused with :class:`PathRefused` unless it
    stays inside ``root``: absolute paths (POSIX or Windows, e.g. ``/etc/passwd``, ``C:\\x``) and
    any ``..`` step are refused outright (even ``a/../b``, which a release never needs), and the
    joined path is resolved through symlinks and must still lie under the resolved ``root``.

    Returns the joined path, not the resolved one, so records keep the release's own file names.
    The file need not exist (a missing image is a different, per-record error).  Every adapter
    resolves the image paths it reads from a release file through here: ONE rule, one place."""
    text = str(relative)
    if not text.strip() or "\x00" in text:
        raise PathRefused(record_id, text, root, "is empty or holds a NUL byte")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:  # a lone surrogate: no file can have this name
        raise PathRefused(record_id, text, root, "is not a valid file name") from None
    posix, windows = PurePosixPath(text), PureWindowsPath(text)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or text.startswith(("/", "\\")):
        raise PathRefused(record_id, text, root, "is absolute")
    if ".." in posix.parts or ".." in windows.parts:
        raise PathRefused(record_id, text, root, "steps out with '..'")
    base = Path(root)
    joined = base / text
    resolved_root = base.resolve()
    if not joined.resolve().is_relative_to(resolved_root):
        raise PathRefused(record_id, text, root, "leads outside its root through a symlink")
    return joined
