"""Client env config is data only: the server side of :mod:`vista_rl.config_fields`.

Every session config a client sends goes through :meth:`ClientConfigCheck.check` before an env sees
it, whatever the env: fields the env's config class marks server-only (import targets, host paths,
factory arguments) are refused with 403, strings that read as code or host references with 422, and
image references in client records are resolved inside the operator's ``--records-root`` (or must be
inline ``data:image/...;base64,`` images).  The env's config class comes from the registry, so a new
plugin is covered by marking its fields, and an unmarked one still gets the default rule.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

import vista_rl
from vista_rl import config_fields


class ClientConfigCheck:
    """Checks client configs for the envs one server hosts (config classes looked up once per id)."""

    def __init__(self, records_root: str | None, config_classes: Mapping[str, type[BaseModel] | None],
                 max_image_pixels: int) -> None:
        self.records_root = records_root
        self.max_image_pixels = max_image_pixels
        self._classes: dict[str, type[BaseModel] | None] = dict(config_classes)
        self._lock = threading.Lock()

    def config_class(self, env_id: str) -> type[BaseModel] | None:
        """The env's pydantic config class, or ``None`` (then only the default rule applies)."""
        with self._lock:
            if env_id not in self._classes:
                try:
                    target = vista_rl.host().spec("envs", env_id).load()
                except Exception:  # noqa: BLE001 - an env the registry cannot load gets the default rule
                    target = None
                self._classes[env_id] = config_fields.config_class_of(target)
            return self._classes[env_id]

    def check(self, env_id: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` as the env may receive it, or :class:`vista_rl.config_fields.ClientConfigRefused`.

        Reads record image files (inside the records root), so call it off the event loop."""
        return config_fields.check_client_config(self.config_class(env_id), config, records_root=self.records_root,
                                                 max_image_pixels=self.max_image_pixels)
