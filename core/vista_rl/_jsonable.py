"""The one ``default=`` function for ``json.dumps`` across the core.

Records (trajectories, per-step metrics) carry whatever envs, tools and trainers put in them:
numpy and torch scalars or arrays, pydantic models, sets, paths.  None of these may stop a record
from being saved, so each is turned into plain JSON and anything else into its ``str``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def json_default(value: Any) -> Any:
    """Use as ``json.dumps(obj, default=json_default)``; never raises."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    try:
        if hasattr(value, "tolist"):  # numpy/torch arrays and scalars
            return value.tolist()
        if hasattr(value, "item"):  # other scalar wrappers
            return value.item()
    except Exception:  # noqa: BLE001 - a broken tolist/item must not lose the record
        pass
    return str(value)
