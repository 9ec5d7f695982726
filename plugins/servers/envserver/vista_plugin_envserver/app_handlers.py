"""The routes of the env server, as module-level functions over the app's
:class:`~vista_plugin_envserver.app_state.EnvServerState` (``request.app.state.env_server``):
``create_app`` only wires them, and each can be called with a Starlette ``Request`` in a test.

A handler reads and validates its body (:mod:`vista_plugin_envserver.app_validation`), looks up
every session id before anything runs, then does the work on a worker thread
(:mod:`vista_plugin_envserver.app_work`).  Answers are msgpack; errors are JSON ``{"error", "status"}``.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from vista_plugin_envserver import app_work
from vista_plugin_envserver.app_state import state_of
from vista_plugin_envserver.app_validation import (
    CreateBody,
    HTTPError,
    ObserveBody,
    ResetBody,
    SessionsBody,
    StepBody,
    admit_create,
    lookup,
)
from vista_plugin_envserver.codec import CONTENT_TYPE, pack

log = logging.getLogger(__name__)


def reply(message: Any) -> Response:
    """``message`` as a msgpack response."""
    return Response(content=pack(message), media_type=CONTENT_TYPE)


def error_response(status: int, message: str) -> JSONResponse:
    """The JSON error body every refusal gets (with ``WWW-Authenticate`` on a 401)."""
    # A message may quote client text holding a lone surrogate, which UTF-8 cannot encode: escape it,
    # or the error about a bad request becomes a 500.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": message, "status": status}, status_code=status, headers=headers)


async def http_error(_request: Request, exc: Exception) -> JSONResponse:
    """An :class:`HTTPError` a handler raised, as its status and message."""
    assert isinstance(exc, HTTPError)
    return error_response(exc.status, exc.message)


async def unexpected(request: Request, exc: Exception) -> JSONResponse:
    """Any other exception: a 500 that names it, the traceback in the operator's log."""
    log.error("internal error on %s", request.url.path, exc_info=exc)
    return error_response(500, f"internal error: {type(exc).__name__}: {exc}")


async def health(request: Request) -> JSONResponse:
    """``GET /health``: liveness, hosted env ids, session statistics (no auth, for probes)."""
    state = state_of(request)
    return JSONResponse({"status": "ok", "envs": state.settings.env_ids, "sessions": state.sessions.stats(),
                         "auth": state.settings.token is not None})


async def create_sessions(request: Request) -> Response:
    """``POST /sessions``: new sessions of one hosted env, a client config checked and probed first."""
    state = state_of(request)
    body: CreateBody = await state.read_body(request, CreateBody)
    env_id = admit_create(state.settings, body)
    created = await state.run(partial(app_work.create_sessions, state, env_id, body.config, body.count))
    return reply({"sessions": created})


async def reset(request: Request) -> Response:
    """``POST /reset``: a batch of resets, one result per item."""
    state = state_of(request)
    body: ResetBody = await state.read_body(request, ResetBody)
    targets = lookup(state.sessions, [item.session for item in body.items])
    one = partial(app_work.reset_one, state.limits, body.image_encoding)
    return reply({"results": await state.run(partial(app_work.each_session, targets, body.items, one, "reset"))})


async def step(request: Request) -> Response:
    """``POST /step``: a batch of actions, one result per item."""
    state = state_of(request)
    body: StepBody = await state.read_body(request, StepBody)
    targets = lookup(state.sessions, [item.session for item in body.items])
    one = partial(app_work.step_one, state.limits, body.image_encoding)
    return reply({"results": await state.run(partial(app_work.each_session, targets, body.items, one, "step"))})


async def oracle(request: Request) -> Response:
    """``POST /oracle``: each session's oracle response, or None."""
    state = state_of(request)
    body: SessionsBody = await state.read_body(request, SessionsBody)
    targets = lookup(state.sessions, body.sessions)
    return reply({"results": await state.run(partial(app_work.oracle_responses, targets))})


async def observe(request: Request) -> Response:
    """``POST /observe``: tool turns the client ran, handed to each session's env within the limits."""
    state = state_of(request)
    body: ObserveBody = await state.read_body(request, ObserveBody)
    targets = lookup(state.sessions, [item.session for item in body.items])
    one = partial(app_work.observe_turn, state.settings.observe)
    return reply({"results": await state.run(partial(app_work.each_session, targets, body.items, one,
                                                     "observe_tool_turn"))})


async def close(request: Request) -> Response:
    """``POST /close``: close sessions (unknown ids are skipped, so it is idempotent)."""
    state = state_of(request)
    body: SessionsBody = await state.read_body(request, SessionsBody)
    return reply({"closed": await state.run(partial(state.sessions.close, body.sessions))})
