"""The one object an env-server app holds (``app.state.env_server``): the settings, the sessions,
the worker threads, the client-config check and the probe lock.  Built whole before the app exists,
so the route handlers (:mod:`vista_plugin_envserver.app_handlers`) are plain module-level functions
over it, and a test can build one and call a handler without starting a server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from pydantic import BaseModel

import vista_rl
from vista_plugin_envserver.app_validation import HTTPError, parse_body
from vista_plugin_envserver.client_config import ClientConfigCheck
from vista_plugin_envserver.codec import CONTENT_TYPE
from vista_plugin_envserver.limits import ClientLimits
from vista_plugin_envserver.sessions import SessionManager
from vista_plugin_envserver.settings import ServerSettings
from vista_rl import Env
from vista_rl.serving import BodyTooLarge, read_limited_body

EnvFactory = Callable[[str, dict[str, Any]], Env]
T = TypeVar("T")


def default_env_factory(settings: ServerSettings) -> EnvFactory:
    """Envs from the plugin registry, the operator's ``env_config`` under the client's config."""

    def make(env_id: str, config: dict[str, Any]) -> Env:
        return vista_rl.make_env(env_id, **{**settings.env_config.get(env_id, {}), **config})

    return make


@dataclass
class EnvServerState:
    """What every handler of one app shares."""

    settings: ServerSettings
    sessions: SessionManager
    #: env calls, body parsing and config checks run here, never on the event loop
    executor: ThreadPoolExecutor
    client_config: ClientConfigCheck
    #: one client-config probe at a time (each may render an oversized frame)
    probe_lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def build(cls, settings: ServerSettings, make_env: EnvFactory | None = None) -> EnvServerState:
        """The state for ``settings``; ``make_env`` defaults to the plugin registry."""
        if not settings.env_ids:
            raise ValueError("the env server needs at least one env id to host")
        sessions = SessionManager(make_env or default_env_factory(settings), max_sessions=settings.max_sessions,
                                  idle_timeout_s=settings.idle_timeout_s)
        executor = ThreadPoolExecutor(max_workers=settings.threads, thread_name_prefix="vista-env")
        client_config = ClientConfigCheck(settings.records_root, settings.config_classes,
                                          settings.limits.max_image_pixels)
        return cls(settings, sessions, executor, client_config)

    @property
    def limits(self) -> ClientLimits:
        return self.settings.limits

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    async def read_body(self, request: Request, model: type[BaseModel]) -> Any:
        """The request's body as ``model``: its size counted as it streams in (413 past the limit),
        then parsed on a worker thread (:func:`~vista_plugin_envserver.app_validation.parse_body`)."""
        try:
            body = await read_limited_body(request.stream(), request.headers.get("content-length"),
                                           self.settings.max_body_bytes)
        except BodyTooLarge as exc:
            raise HTTPError(413, str(exc)) from None
        content_type = request.headers.get("content-type", CONTENT_TYPE).split(";")[0].strip()
        return await self.run(partial(parse_body, self.settings, model, body, content_type))

    async def reap(self) -> None:
        """Expire idle sessions every quarter of the idle timeout (0.05-5 s), until cancelled."""
        interval = max(0.05, min(self.settings.idle_timeout_s / 4, 5.0))
        while True:
            await asyncio.sleep(interval)
            await self.run(self.sessions.expire_idle)

    def shutdown(self) -> None:
        """Close every session and drop queued work."""
        self.sessions.close_all()
        self.executor.shutdown(wait=False, cancel_futures=True)


def state_of(request: Request) -> EnvServerState:
    """The :class:`EnvServerState` of the app serving ``request``."""
    state = request.app.state.env_server
    assert isinstance(state, EnvServerState), "app.state.env_server is set by create_app"
    return state


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Reap idle sessions while the app runs; on shutdown close them all and stop the threads."""
    state: EnvServerState = app.state.env_server
    task = asyncio.create_task(state.reap())
    try:
        yield
    finally:
        task.cancel()
        state.shutdown()
