"""Rendering from many threads: pygame's lazily imported submodules, loaded once, and one render lock.

Why: the rollout engine makes and resets envs on several threads.  pygame imports ``surfarray``
lazily (``importlib.util.LazyLoader``): the first attribute access runs the module, and a second
thread that touches it meanwhile sees a half-initialised module (``module 'pygame.surfarray' has no
attribute 'pixels3d'``: 3 of 12 FrozenLake episodes failed).  :func:`prepare_renderers` forces those
imports once, under a lock, before the first env renders; :data:`RENDER_LOCK` serialises the
render calls themselves, since neither pygame nor gymnasium's toy-text renderers promise thread
safety (a frame takes about a millisecond, so the lock costs little).
"""

from __future__ import annotations

import importlib.util
import threading

#: Held around every render call of a bridged env (re-entrant: a render may call another).
RENDER_LOCK = threading.RLock()
_LAZY_PYGAME_MODULES = ("surfarray", "sndarray")
_prepared = threading.Event()


def prepare_renderers() -> None:
    """Load pygame's lazy submodules now, once per process (no-op without pygame)."""
    if _prepared.is_set():
        return
    with RENDER_LOCK:
        if _prepared.is_set():
            return
        if importlib.util.find_spec("pygame") is not None:
            import pygame

            for name in _LAZY_PYGAME_MODULES:
                module = getattr(pygame, name, None)
                try:
                    getattr(module, "__name__", None)  # the first attribute access runs a lazy module
                    dir(module)
                except Exception:  # noqa: BLE001 - a missing optional part (no numpy, no mixer) is pygame's own report
                    pass
        _prepared.set()
