"""Ids of installed gymnasium env packages (MiniGrid, ALE, ...) resolve without a module prefix.

Why: since gymnasium 1.0 a package registers its envs when it is imported (``import ale_py`` or
``gymnasium.register_envs(minigrid)``), and the pre-1.0 ``gymnasium.envs`` entry points are no longer
read by gymnasium itself.  A VISTA config only names an id (``MiniGrid-Empty-5x5-v0``, ``ALE/Pong-v5``),
so before ``gymnasium.make`` we do the import the user would have written: the packages that
declare ``gymnasium.envs`` entry points, and the well-known packages below that register on import.
Only installed distributions' own declarations and this fixed table are imported; the id is never
an import path (a ``module:`` prefix is still gymnasium's own business).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import logging
import threading

_log = logging.getLogger(__name__)

#: Packages that register their gymnasium envs on import, with the id prefixes they own.
KNOWN_PACKAGES: dict[str, tuple[str, ...]] = {
    "minigrid": ("MiniGrid-", "BabyAI-"),
    "ale_py": ("ALE/",),
    "miniworld": ("MiniWorld-",),
    "highway_env": ("highway-", "merge-", "roundabout-", "parking-", "intersection-", "racetrack-"),
    "gymnasium_robotics": (),
    "shimmy": (),
}
ENTRY_POINT_GROUP = "gymnasium.envs"  # gymnasium < 1.0's plugin group, still declared by some packages

_lock = threading.Lock()
_imported: set[str] = set()


def _registered(gym_id: str) -> bool:
    from gymnasium.envs.registration import registry

    name = gym_id.split(":", 1)[-1]
    if name in registry:
        return True
    base = name.rsplit("-v", 1)[0]  # an unversioned id resolves to the newest version, as gymnasium does
    return "-v" not in name and any(key.rsplit("-v", 1)[0] == base for key in registry)


def _import(module: str) -> None:
    if module in _imported or importlib.util.find_spec(module) is None:
        return
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - one broken package must not stop the others
        _log.warning("gymnasium env package %s failed to import: %s: %s", module, type(exc).__name__, exc)
    _imported.add(module)


def _load_entry_points() -> None:
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = f"entry-point:{entry_point.value}"
        if key in _imported:
            continue
        _imported.add(key)
        try:
            target = entry_point.load()
            if callable(target):
                target()
        except Exception as exc:  # noqa: BLE001
            _log.warning("gymnasium env plugin %s failed: %s: %s", entry_point.value, type(exc).__name__, exc)


def ensure_registered(gym_id: str) -> bool:
    """Import the installed package that registers ``gym_id`` (owners of its prefix first, then the
    rest); ``True`` when gymnasium knows the id afterwards."""
    if ":" in gym_id or _registered(gym_id):
        return True
    with _lock:
        owners = [module for module, prefixes in KNOWN_PACKAGES.items() if prefixes and gym_id.startswith(prefixes)]
        for module in owners:
            _import(module)
            if _registered(gym_id):
                return True
        _load_entry_points()
        for module in KNOWN_PACKAGES:
            if _registered(gym_id):
                return True
            _import(module)
        return _registered(gym_id)


def installed_packages() -> list[str]:
    """The known gymnasium env packages installed here (for error messages)."""
    return [module for module in KNOWN_PACKAGES if importlib.util.find_spec(module) is not None]
