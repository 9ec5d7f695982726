"""What the env server checks on a request before any env runs: the body schemas, the body parsed
into one of them (:func:`parse_body`), the session ids looked up all at once (:func:`lookup`) and
whether a ``/sessions`` request may have what it asks for (:func:`admit_create`).

Plain functions over the settings and the session manager, so each check is tested without a
server.  Every refusal is an :class:`HTTPError` whose status and message the client gets; a body is
data only (msgpack or JSON into pydantic models that forbid unknown keys), never code.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vista_plugin_envserver.codec import CodecError, ImageEncoding, unpack
from vista_plugin_envserver.limits import LimitError
from vista_plugin_envserver.sessions import Session, SessionError, SessionManager
from vista_plugin_envserver.settings import ServerSettings
from vista_rl.serving import nesting_depth

#: session-id problems quoted in one 404 (the rest are counted)
MAX_QUOTED_PROBLEMS = 5


class HTTPError(Exception):
    """A refused request: ``status`` and ``message`` are what the client gets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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


def decode(body: bytes, content_type: str, max_depth: int) -> dict[str, Any]:
    """The body as a map (JSON when ``content_type`` says so, msgpack otherwise), or 400 when it is
    malformed, nests deeper than ``max_depth`` or is not a map."""
    try:
        if content_type == "application/json":
            data = json.loads(body or b"{}")
        else:
            data = unpack(body) if body else {}
    except (CodecError, ValueError) as exc:
        raise HTTPError(400, f"malformed body: {exc}") from None
    except RecursionError:
        raise HTTPError(400, "malformed body: nested too deeply to parse") from None
    if nesting_depth(data, max_depth) > max_depth:
        raise HTTPError(400, f"malformed body: nested deeper than {max_depth} levels")
    if not isinstance(data, dict):
        raise HTTPError(400, f"malformed body: expected a map at the top level, got {type(data).__name__}")
    return data


def parse_body(settings: ServerSettings, model: type[BaseModel], body: bytes, content_type: str) -> Any:
    """A request body as ``model``, or :class:`HTTPError` (400 malformed or nested deeper than
    ``max_json_depth``, 422 wrong schema, 413 a batch over ``max_batch``).  Run on a worker thread:
    decoding and walking an 8 MB body takes a fraction of a second the event loop must not wait."""
    data = decode(body, content_type, settings.max_json_depth)
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


def lookup(sessions: SessionManager, ids: list[str]) -> list[Session]:
    """The session of every id, or one 404 naming the unknown ones, so a batch with a bad id
    changes nothing."""
    found: list[Session] = []
    problems: list[str] = []
    for session_id in ids:
        try:
            found.append(sessions.get(session_id))
        except SessionError as exc:
            problems.append(str(exc))
    if problems:
        more = len(problems) - MAX_QUOTED_PROBLEMS
        raise HTTPError(404, "; ".join(problems[:MAX_QUOTED_PROBLEMS]) + (f" (and {more} more)" if more > 0 else ""))
    return found


def admit_create(settings: ServerSettings, body: CreateBody) -> str:
    """The env id a ``/sessions`` request gets, once the checks that need no env pass: the id is
    hosted here (404), client config is allowed (403) and within the client limits."""
    env_id = body.env_id or settings.env_ids[0]
    if env_id not in settings.env_ids:
        raise HTTPError(404, f"this server hosts {', '.join(settings.env_ids)}, not {env_id!r}")
    if body.config and not settings.allow_client_config:
        raise HTTPError(403, "this server does not accept per-session env config")
    if body.config:
        try:
            settings.limits.check_config(env_id, body.config)
        except LimitError as exc:
            raise HTTPError(exc.status, exc.message) from None
    return env_id
