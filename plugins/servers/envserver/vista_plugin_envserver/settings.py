"""What ``vista env-server`` can set, in one dataclass the CLI fills and the app's state reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from vista_plugin_envserver.limits import ClientLimits
from vista_plugin_envserver.observe_limits import ObserveLimits


@dataclass
class ServerSettings:
    """Everything ``vista env-server`` can set."""

    env_ids: list[str]
    env_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    token: str | None = None
    max_sessions: int = 1024
    idle_timeout_s: float = 600.0
    max_body_bytes: int = 8 * 1024 * 1024
    max_batch: int = 1024
    allow_client_config: bool = True
    threads: int = 4
    limits: ClientLimits = field(default_factory=ClientLimits)
    #: what ``/observe`` may hand a session's env (per call, per item, per episode)
    observe: ObserveLimits = field(default_factory=ObserveLimits)
    max_json_depth: int = 32
    #: folder that image paths in client-supplied records resolve inside (None: inline images only)
    records_root: str | None = None
    #: the config class of an env id, where the registry cannot tell (tests with their own factory)
    config_classes: dict[str, type[BaseModel] | None] = field(default_factory=dict)
