"""The HTTP API of the env server (FastAPI).

Routes (bodies and responses are msgpack, see ``codec``; errors are JSON ``{"error": ...}``):

- ``GET /health``: liveness, hosted env ids, session statistics (no auth, for probes).
- ``POST /sessions`` ``{env_id?, config?, count?}`` -> ``{sessions: [{id, env_id, system_prompt, tools}]}``
- ``POST /reset`` ``{items: [{session, seed}], image_encoding?}`` -> ``{results: [...]}``
- ``POST /step`` ``{items: [{session, action}], image_encoding?}`` -> ``{results: [...]}``
- ``POST /oracle`` ``{sessions: [...]}`` -> ``{results: [str | None]}``
- ``POST /observe`` ``{items: [{session, response, calls: [{name, arguments, result_text, num_images,
  error}]}]}`` -> ``{results: [{ok, error?}]}``: ``Env.observe_tool_turn`` (a tool turn the client's
  rollout engine ran), each item within :class:`~vista_plugin_envserver.observe_limits.ObserveLimits`
  (per call, per item, per session per episode); a client treats a 404 for the route itself (an
  older server) as a no-op
- ``POST /close`` ``{sessions: [...]}`` -> ``{closed: n}``

Reset and step are batched: one request moves many sessions, which is what makes the server fast
(HTTP and event-loop overhead is paid once per batch, not once per env).  Every session id in a
batch is checked before anything runs, so a bad id changes nothing; an env that raises fails only
its own item (``{"ok": false, "error": ...}``), never the batch or the server.

With a token set, every route but ``/health`` needs it, FastAPI's ``/docs`` and ``/openapi.json``
included.  What clients may configure, and how large the frames they get back may be, is bounded by
:class:`~vista_plugin_envserver.limits.ClientLimits`; a request past a limit gets a 4xx that says
which one.

The parts, each tested without a server: :mod:`~vista_plugin_envserver.app_validation` (body
schemas and request checks), :mod:`~vista_plugin_envserver.app_state` (the one state object and the
lifespan), :mod:`~vista_plugin_envserver.app_work` (what runs on worker threads) and
:mod:`~vista_plugin_envserver.app_handlers` (the routes); :func:`create_app` only wires them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from vista_plugin_envserver import app_handlers
from vista_plugin_envserver.app_state import EnvServerState, lifespan
from vista_plugin_envserver.app_validation import (
    CreateBody,
    HTTPError,
    ObserveBody,
    ObserveItem,
    ResetBody,
    ResetItem,
    SessionsBody,
    StepBody,
    StepItem,
    ToolCallItem,
    parse_body,
)
from vista_plugin_envserver.app_work import each_session, observe_turn
from vista_plugin_envserver.settings import ServerSettings
from vista_rl import Env
from vista_rl.serving import BearerAuth

__all__ = ["CreateBody", "HTTPError", "ObserveBody", "ObserveItem", "ResetBody", "ResetItem", "ServerSettings",
           "SessionsBody", "StepBody", "StepItem", "ToolCallItem", "create_app", "each_session", "observe_turn",
           "parse_body"]

#: (method, path, handler) of every route
ROUTES: tuple[tuple[str, str, Callable[..., Any]], ...] = (
    ("GET", "/health", app_handlers.health),
    ("POST", "/sessions", app_handlers.create_sessions),
    ("POST", "/reset", app_handlers.reset),
    ("POST", "/step", app_handlers.step),
    ("POST", "/oracle", app_handlers.oracle),
    ("POST", "/observe", app_handlers.observe),
    ("POST", "/close", app_handlers.close),
)


def create_app(settings: ServerSettings, make_env: Callable[[str, dict[str, Any]], Env] | None = None) -> FastAPI:
    """Build the app; ``make_env`` defaults to the plugin registry (tests may pass a factory)."""
    state = EnvServerState.build(settings, make_env)
    app = FastAPI(title="VISTA env server", lifespan=lifespan)
    app.state.env_server = state
    app.state.sessions = state.sessions
    app.state.settings = settings
    if settings.token:
        app.add_middleware(BearerAuth, token=settings.token, open_paths=("/health",))  # type: ignore[arg-type]
    for method, path, handler in ROUTES:
        app.add_api_route(path, handler, methods=[method], response_model=None)
    app.add_exception_handler(HTTPError, app_handlers.http_error)
    app.add_exception_handler(Exception, app_handlers.unexpected)
    return app
