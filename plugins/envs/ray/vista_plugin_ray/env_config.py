"""The ``ray`` env id's arguments as a config class, so the core can read what they mean.

``env`` names the env to run in the actor: an env id, or an import path (``pkg.mod:Factory``) the
actor imports and calls.  Marking it :data:`~vista_rl.config_fields.ImportTarget` lets a local run
name that code before it is imported (``vista train --dry-run``, the outside-code warning and
``--strict``) and makes the env server refuse it from clients; ``wraps_env`` lets those checks follow
``config`` into the wrapped env's own config class.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from vista_rl import config_fields

Recovery = Literal["replay", "fail"]


class RayEnvConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: the field naming the wrapped env, and the field holding its config
    wraps_env: ClassVar[tuple[str, str]] = ("env", "config")

    env: Annotated[str, config_fields.ImportTarget] = Field(description="env id, or pkg.mod:Factory imported in the actor")
    config: dict[str, Any] | None = Field(None, description="the wrapped env's config")
    recovery: Recovery = "replay"
    call_timeout_s: float = 60.0
    max_restarts: int = 3
    actor_options: dict[str, Any] | None = None
