"""Values written into Hydra overrides (``key=value`` on verl's command line), shared by the RL and
SFT configs."""

from __future__ import annotations

from typing import Any


def hydra_value(value: Any) -> str:
    """A Hydra override value: strings quoted so paths and ids with ``/`` or ``=`` survive."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(hydra_value(item) for item in value) + "]"
    text = str(value)
    if text and all(ch.isalnum() or ch in "_./:-" for ch in text):
        return text
    return "'" + text.replace("'", "\\'") + "'"
