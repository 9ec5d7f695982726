"""The env worker: a Ray actor that hosts many env instances ("slots").

The actor discovers plugins itself, through entry points (``vista_rl.load_plugins()`` in its own
process), so nothing about the driver's registry is shipped across processes: a worker on another
machine sees exactly the plugins installed there.  Envs not packaged as plugins can be named by an
importable ``"package.module:Class"`` path instead of an id.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import vista_rl
from vista_rl import Env, Observation, StepResult, is_import_path, resolve_import_path


def build_env(env: str, config: dict[str, Any]) -> Env:
    """A registered id, or an importable ``module:Class`` path (for envs outside plugins)."""
    if is_import_path(env):
        made = resolve_import_path(env)(**config)
        if not isinstance(made, Env):
            raise TypeError(f"{env} made a {type(made).__name__}, not a vista_rl.Env")
        return made
    return vista_rl.make_env(env, **config)


class EnvWorker:
    """Plain class; :func:`vista_plugin_ray.pool.worker_actor_class` wraps it with ``ray.remote``."""

    def __init__(self) -> None:
        vista_rl.load_plugins()
        self._envs: dict[str, Env] = {}

    def info(self) -> dict[str, Any]:
        plugins = [p.name for p in vista_rl.get_plugins()]
        return {"pid": os.getpid(), "host": socket.gethostname(), "plugins": plugins,
                "envs": vista_rl.host().registry("envs").ids(), "slots": len(self._envs)}

    def create(self, slot: str, env: str, config: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
        self.close(slot)
        instance = build_env(env, config)
        self._envs[slot] = instance
        return instance.system_prompt(), tuple(instance.tools)

    def reset(self, slot: str, seed: int | None) -> tuple[Observation, dict[str, Any]]:
        return self._env(slot).reset(seed=seed)

    def step(self, slot: str, action: str) -> StepResult:
        return self._env(slot).step(action)

    def oracle(self, slot: str) -> str | None:
        return self._env(slot).oracle_response()

    def close(self, slot: str) -> None:
        env = self._envs.pop(slot, None)
        if env is not None:
            env.close()

    def _env(self, slot: str) -> Env:
        try:
            return self._envs[slot]
        except KeyError:
            raise KeyError(f"env slot {slot!r} does not exist on this worker (pid {os.getpid()})") from None
