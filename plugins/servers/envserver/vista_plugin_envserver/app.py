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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

import vista_rl
from vista_plugin_envserver.client_config import ClientConfigCheck
from vista_plugin_envserver.codec import (
    CONTENT_TYPE,
    CodecError,
    ImageEncoding,
    encode_observation,
    encode_step,
    pack,
    unpack,
)
from vista_plugin_envserver.limits import ClientLimits, LimitError
from vista_plugin_envserver.observe_limits import ObserveLimits
from vista_plugin_envserver.sessions import Session, SessionError, SessionManager
from vista_rl import Env, ToolCallRecord, config_fields
from vista_rl.serving import BearerAuth, BodyTooLarge, nesting_depth, read_limited_body, short

log = logging.getLogger(__name__)


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


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateBody(_Body):
    env_id: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    count: int = Field(1, ge=1)


class ResetItem(_Body):
    session: str
    seed: int | None = None


class StepItem(_Body):
    session: str
    action: str


class ResetBody(_Body):
    items: list[ResetItem]
    image_encoding: ImageEncoding = "raw"


class StepBody(_Body):
    items: list[StepItem]
    image_encoding: ImageEncoding = "raw"


class SessionsBody(_Body):
    sessions: list[str]


class ToolCallItem(_Body):
    """A ``vista_rl.trajectory.ToolCallRecord`` as data."""

    name: str
    arguments: Any = None
    result_text: str = ""
    num_images: int = Field(0, ge=0)
    error: bool = False


class ObserveItem(_Body):
    session: str
    response: str
    calls: list[ToolCallItem] = Field(default_factory=list, max_length=64)


class ObserveBody(_Body):
    items: list[ObserveItem]


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _error_response(status: int, message: str) -> JSONResponse:
    # A message may quote client text holding a lone surrogate, which UTF-8 cannot encode: escape it,
    # or the error about a bad request becomes a 500.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": message, "status": status}, status_code=status, headers=headers)


def _default_env_factory(settings: ServerSettings) -> Callable[[str, dict[str, Any]], Env]:
    def make(env_id: str, config: dict[str, Any]) -> Env:
        return vista_rl.make_env(env_id, **{**settings.env_config.get(env_id, {}), **config})

    return make


def parse_body(settings: ServerSettings, model: type[BaseModel], body: bytes, content_type: str) -> Any:
    """A request body as ``model``, or :class:`HTTPError` (400 malformed or nested deeper than
    ``max_json_depth``, 422 wrong schema, 413 a batch over ``max_batch``).  Run on a worker thread:
    decoding and walking an 8 MB body takes a fraction of a second the event loop must not wait."""
    try:
        if content_type == "application/json":
            data = json.loads(body or b"{}")
        else:
            data = unpack(body) if body else {}
    except (CodecError, ValueError) as exc:
        raise HTTPError(400, f"malformed body: {exc}") from None
    except RecursionError:
        raise HTTPError(400, "malformed body: nested too deeply to parse") from None
    if nesting_depth(data, settings.max_json_depth) > settings.max_json_depth:
        raise HTTPError(400, f"malformed body: nested deeper than {settings.max_json_depth} levels")
    if not isinstance(data, dict):
        raise HTTPError(400, f"malformed body: expected a map at the top level, got {type(data).__name__}")
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(body)'}: {err['msg']}" for err in exc.errors()
        )
        raise HTTPError(422, f"invalid request: {problems}") from None
    items = getattr(parsed, "items", None) or getattr(parsed, "sessions", None) or []
    if len(items) > settings.max_batch:
        raise HTTPError(413, f"batch of {len(items)} exceeds the limit of {settings.max_batch} items")
    return parsed


def each_session(sessions: list[Session], items: list[Any], call: Callable[[Session, Any], dict[str, Any]],
                 what: str) -> list[dict[str, Any]]:
    """Run ``call`` on every (session, item) under the session's lock; an env that raises fails only
    its own item (``{"ok": False, "error": ...}``), as does an item past a limit, the rest of the
    batch still runs."""
    out: list[dict[str, Any]] = []
    for session, item in zip(sessions, items, strict=True):
        with session.lock:
            try:
                out.append({"ok": True, **call(session, item)})
            except LimitError as exc:
                out.append({"ok": False, "error": f"{what} refused: {exc.message}", "status": exc.status})
            except Exception as exc:  # noqa: BLE001 - a crashing env must not take the batch down
                out.append({"ok": False, "error": f"{what} raised {type(exc).__name__}: {exc}"})
    return out


def observe_turn(limits: ObserveLimits, session: Session, item: ObserveItem) -> dict[str, Any]:
    """One ``/observe`` item: checked against ``limits`` and charged to the session's episode
    before the env sees any of it (a refused item changes nothing)."""
    limits.admit(session.observed, item.response, item.calls)
    session.env.observe_tool_turn(item.response, [ToolCallRecord(**call.model_dump()) for call in item.calls])
    return {}


def create_app(settings: ServerSettings, make_env: Callable[[str, dict[str, Any]], Env] | None = None) -> FastAPI:
    """Build the app; ``make_env`` defaults to the plugin registry (tests may pass a factory)."""
    if not settings.env_ids:
        raise ValueError("the env server needs at least one env id to host")
    sessions = SessionManager(
        make_env or _default_env_factory(settings),
        max_sessions=settings.max_sessions,
        idle_timeout_s=settings.idle_timeout_s,
    )
    executor = ThreadPoolExecutor(max_workers=settings.threads, thread_name_prefix="vista-env")

    async def reaper() -> None:
        interval = max(0.05, min(settings.idle_timeout_s / 4, 5.0))
        while True:
            await asyncio.sleep(interval)
            await asyncio.get_running_loop().run_in_executor(executor, sessions.expire_idle)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(reaper())
        try:
            yield
        finally:
            task.cancel()
            sessions.close_all()
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="VISTA env server", lifespan=lifespan)
    app.state.sessions = sessions
    app.state.settings = settings
    if settings.token:
        app.add_middleware(BearerAuth, token=settings.token, open_paths=("/health",))  # type: ignore[arg-type]
    limits = settings.limits
    probe_lock = threading.Lock()
    client_config = ClientConfigCheck(settings.records_root, settings.config_classes, limits.max_image_pixels)

    async def run(fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(executor, fn)

    async def read_body(request: Request, model: type[BaseModel]) -> Any:
        try:
            body = await read_limited_body(request.stream(), request.headers.get("content-length"),
                                           settings.max_body_bytes)
        except BodyTooLarge as exc:
            raise HTTPError(413, str(exc)) from None
        content_type = request.headers.get("content-type", CONTENT_TYPE).split(";")[0].strip()
        return await run(partial(parse_body, settings, model, body, content_type))

    def lookup(ids: list[str]) -> list[Session]:
        found: list[Session] = []
        problems: list[str] = []
        for session_id in ids:
            try:
                found.append(sessions.get(session_id))
            except SessionError as exc:
                problems.append(str(exc))
        if problems:
            raise HTTPError(404, "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
        return found

    def reply(message: Any) -> Response:
        return Response(content=pack(message), media_type=CONTENT_TYPE)

    @app.exception_handler(HTTPError)
    async def _http_error(_request: Request, exc: HTTPError) -> JSONResponse:
        return _error_response(exc.status, exc.message)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error on %s", _request.url.path, exc_info=exc)  # the operator needs the traceback
        return _error_response(500, f"internal error: {type(exc).__name__}: {exc}")

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok", "envs": settings.env_ids, "sessions": sessions.stats(),
                             "auth": settings.token is not None})

    @app.post("/sessions")
    async def create_sessions(request: Request) -> Response:
        body: CreateBody = await read_body(request, CreateBody)
        env_id = body.env_id or settings.env_ids[0]
        if env_id not in settings.env_ids:
            raise HTTPError(404, f"this server hosts {', '.join(settings.env_ids)}, not {env_id!r}")
        if body.config and not settings.allow_client_config:
            raise HTTPError(403, "this server does not accept per-session env config")
        if body.config:
            try:
                limits.check_config(env_id, body.config)
            except LimitError as exc:
                raise HTTPError(exc.status, exc.message) from None

        def create() -> list[dict[str, Any]]:
            config = client_config.check(env_id, body.config) if body.config else {}
            made = sessions.create(env_id, config, body.count)
            if body.config:
                probe(made)
            return [{"id": s.id, "env_id": s.env_id, "system_prompt": s.env.system_prompt(),
                     "tools": list(s.env.tools)} for s in made]

        def probe(made: list[Session]) -> None:
            # A client-chosen config is tried once before it is handed out: frames past the caps
            # are refused now, before the client holds sessions that each cost hundreds of MB.
            # One probe at a time, so hostile clients in parallel cost one oversized frame, not many.
            try:
                with probe_lock, made[0].lock:
                    observation, _info = made[0].env.reset(seed=0)
                    limits.check_observation(observation)
                    del observation
            except BaseException:
                sessions.close([s.id for s in made])
                raise

        try:
            created = await run(create)
        except SessionError as exc:
            raise HTTPError(exc.status, str(exc)) from None
        except config_fields.ClientConfigRefused as exc:
            raise HTTPError(exc.status, f"env {env_id!r}: {exc.message}") from None
        except LimitError as exc:
            raise HTTPError(exc.status, f"config {short(body.config)} refused: {exc.message}") from None
        except Exception as exc:  # noqa: BLE001 - a bad config must not crash the server
            raise HTTPError(400, f"could not create env {env_id!r} with config {short(body.config)}: "
                                 f"{type(exc).__name__}: {short(str(exc), 300)}") from None
        return reply({"sessions": created})

    @app.post("/reset")
    async def reset(request: Request) -> Response:
        body: ResetBody = await read_body(request, ResetBody)
        targets = lookup([item.session for item in body.items])

        def reset_one(session: Session, item: ResetItem) -> dict[str, Any]:
            observation, info = session.env.reset(seed=item.seed)
            session.observed.clear()
            limits.check_observation(observation)
            session.episodes += 1
            return {"observation": encode_observation(observation, body.image_encoding), "info": info}

        def work() -> list[dict[str, Any]]:
            return each_session(targets, body.items, reset_one, "reset")

        return reply({"results": await run(work)})

    @app.post("/step")
    async def step(request: Request) -> Response:
        body: StepBody = await read_body(request, StepBody)
        targets = lookup([item.session for item in body.items])

        def step_one(session: Session, item: StepItem) -> dict[str, Any]:
            result = session.env.step(item.action)
            limits.check_observation(result.observation)
            session.steps += 1
            return encode_step(result, body.image_encoding)

        def work() -> list[dict[str, Any]]:
            return each_session(targets, body.items, step_one, "step")

        return reply({"results": await run(work)})

    @app.post("/oracle")
    async def oracle(request: Request) -> Response:
        body: SessionsBody = await read_body(request, SessionsBody)
        targets = lookup(body.sessions)

        def work() -> list[str | None]:
            out: list[str | None] = []
            for session in targets:
                with session.lock:
                    try:
                        out.append(session.env.oracle_response())
                    except Exception:  # noqa: BLE001
                        out.append(None)
            return out

        return reply({"results": await run(work)})

    @app.post("/observe")
    async def observe(request: Request) -> Response:
        body: ObserveBody = await read_body(request, ObserveBody)
        targets = lookup([item.session for item in body.items])

        def work() -> list[dict[str, Any]]:
            return each_session(targets, body.items, partial(observe_turn, settings.observe), "observe_tool_turn")

        return reply({"results": await run(work)})

    @app.post("/close")
    async def close(request: Request) -> Response:
        body: SessionsBody = await read_body(request, SessionsBody)
        return reply({"closed": await run(lambda: sessions.close(body.sessions))})

    return app
