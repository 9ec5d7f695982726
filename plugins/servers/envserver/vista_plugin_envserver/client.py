"""Clients of the env server: a batched client, and ``RemoteEnv``, a vista Env backed by one session.

``RemoteEnv`` is an ordinary Env, so rollouts, checks and evaluation use a remote env exactly like a
local one (``vista_rl.make_env("remote", url=..., env=...)``).  As every Env, its ``step`` never
raises: a server or network failure ends the episode with ``truncated=True`` and the error in
``info["env_error"]``, and the run records it and goes on.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from vista_plugin_envserver.codec import (
    CONTENT_TYPE,
    CodecError,
    ImageEncoding,
    decode_observation,
    decode_step,
    pack,
    unpack,
    wire_text,
)
from vista_rl import Env, Observation, StepResult, ToolCallRecord, VistaError

TOKEN_ENV_VAR = "VISTA_ENV_SERVER_TOKEN"


class EnvServerError(VistaError):
    """The env server refused a request or could not be reached; ``status`` is the HTTP status
    (0 when there was no HTTP answer)."""

    def __init__(self, status: int, message: str, route_missing: bool = False) -> None:
        super().__init__(f"env server error {status}: {message}" if status else f"env server unreachable: {message}")
        self.status = status
        self.message = message
        #: a 404 for the route itself (the server predates it), not for a session or env it knows
        self.route_missing = route_missing


@dataclass
class SessionInfo:
    id: str
    env_id: str
    system_prompt: str = ""
    tools: tuple[str, ...] = ()


@dataclass
class ItemError:
    """One item of a batch that failed on the server (the env raised)."""

    message: str


@dataclass
class EnvServerClient:
    """Batched access to one server; thread-safe (httpx clients are)."""

    url: str
    token: str | None = None
    timeout_s: float = 60.0
    image_encoding: ImageEncoding = "raw"
    #: whether the server has the ``/observe`` route (set false by its first 404 for the route)
    observes: bool = True
    _http: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        token = self.token if self.token is not None else os.environ.get(TOKEN_ENV_VAR)
        headers = {"content-type": CONTENT_TYPE, "accept": CONTENT_TYPE}
        if token:
            headers["authorization"] = f"Bearer {token}"
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=self.timeout_s, limits=limits)

    # ------------------------------------------------------------------ transport
    def _post(self, path: str, message: dict[str, Any]) -> Any:
        try:
            response = self._http.post(path, content=pack(message))
        except httpx.HTTPError as exc:
            raise EnvServerError(0, f"{self.url}{path}: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            try:
                error = response.json()
            except ValueError:
                error = None
            ours = isinstance(error, dict) and "error" in error  # this server's errors; FastAPI's own say "detail"
            detail = error["error"] if ours else response.text[:500]
            raise EnvServerError(response.status_code, str(detail),
                                 route_missing=response.status_code == 404 and not ours)
        return unpack(response.content)

    def health(self) -> dict[str, Any]:
        try:
            response = self._http.get("/health")
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise EnvServerError(0, f"{self.url}/health: {exc}") from None
        return dict(response.json())

    # --------------------------------------------------------------------- batch API
    def create(self, count: int = 1, env_id: str | None = None, config: dict[str, Any] | None = None) -> list[SessionInfo]:
        reply = self._post("/sessions", {"env_id": env_id, "config": config or {}, "count": count})
        return [SessionInfo(s["id"], s["env_id"], s.get("system_prompt", ""), tuple(s.get("tools", ())))
                for s in reply["sessions"]]

    def reset(self, items: Sequence[tuple[str, int | None]]) -> list[tuple[Observation, dict[str, Any]] | ItemError]:
        reply = self._post("/reset", {"items": [{"session": s, "seed": seed} for s, seed in items],
                                      "image_encoding": self.image_encoding})
        return [(decode_observation(r["observation"]), dict(r.get("info") or {})) if r.get("ok")
                else ItemError(str(r.get("error"))) for r in reply["results"]]

    def step(self, items: Sequence[tuple[str, str]]) -> list[StepResult | ItemError]:
        reply = self._post("/step", {"items": [{"session": s, "action": wire_text(a) if isinstance(a, str) else a} for s, a in items],
                                     "image_encoding": self.image_encoding})
        return [decode_step(r) if r.get("ok") else ItemError(str(r.get("error"))) for r in reply["results"]]

    def observe_tool_turn(self, items: Sequence[tuple[str, str, Sequence[ToolCallRecord]]]) -> list[ItemError | None]:
        """``Env.observe_tool_turn`` for each (session, response, calls).  A server older than the
        ``/observe`` route answers 404 for the route: then every item is a no-op (``None``), as for a
        local env that keeps the default, and later calls are not sent."""
        if not self.observes:
            return [None] * len(items)
        message = {"items": [{"session": session, "response": wire_text(str(response)),
                              "calls": [_wire_call(call) for call in calls]} for session, response, calls in items]}
        try:
            reply = self._post("/observe", message)
        except EnvServerError as exc:
            if not exc.route_missing:
                raise
            self.observes = False
            return [None] * len(items)
        return [None if r.get("ok") else ItemError(str(r.get("error"))) for r in reply["results"]]

    def oracle(self, session_ids: Sequence[str]) -> list[str | None]:
        return list(self._post("/oracle", {"sessions": list(session_ids)})["results"])

    def close_sessions(self, session_ids: Sequence[str]) -> int:
        return int(self._post("/close", {"sessions": list(session_ids)})["closed"])

    def close(self) -> None:
        self._http.close()


class RemoteEnv(Env):
    """A vista Env whose episodes run in a session on an env server.

    ``env`` picks one of the server's env ids (default: its first); ``config`` is passed to the env's
    constructor on the server.  The token defaults to ``$VISTA_ENV_SERVER_TOKEN``.
    """

    def __init__(self, url: str, env: str | None = None, token: str | None = None,
                 config: dict[str, Any] | None = None, timeout_s: float = 60.0,
                 image_encoding: ImageEncoding = "raw", client: EnvServerClient | None = None) -> None:
        self._owns_client = client is None
        self.client = client or EnvServerClient(url, token=token, timeout_s=timeout_s, image_encoding=image_encoding)
        try:
            self.session = self.client.create(1, env_id=env, config=config)[0]
        except BaseException:
            if self._owns_client:
                self.client.close()
            raise
        self.env_id = self.session.env_id
        self.tools = self.session.tools
        self._closed = False

    def system_prompt(self) -> str:
        return self.session.system_prompt

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        result = self.client.reset([(self.session.id, seed)])[0]
        if isinstance(result, ItemError):
            raise EnvServerError(500, f"remote {self.env_id} {result.message}")
        return result

    def step(self, action: str) -> StepResult:
        try:
            result = self.client.step([(self.session.id, action)])[0]
        except (EnvServerError, CodecError) as exc:  # CodecError: the server's reply did not decode
            return _failed_step(str(exc))
        if isinstance(result, ItemError):
            return _failed_step(f"remote {self.env_id} {result.message}")
        return result

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        """Forwarded to the session's env (a no-op on a server without the route).  Unlike ``step``
        this raises on a server or env failure, so the rollout engine fails the episode with the
        reason instead of scoring a chain the env did not see."""
        try:
            result = self.client.observe_tool_turn([(self.session.id, response, calls)])[0]
        except CodecError as exc:
            raise EnvServerError(0, f"remote {self.env_id} observe_tool_turn: {exc}") from None
        if isinstance(result, ItemError):
            raise EnvServerError(500, f"remote {self.env_id} {result.message}")

    def oracle_response(self) -> str | None:
        try:
            return self.client.oracle([self.session.id])[0]
        except EnvServerError:
            return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.client.close_sessions([self.session.id])
        except EnvServerError:
            pass  # the server is gone or the session expired: nothing left to free
        finally:
            if self._owns_client:
                self.client.close()


def _wire_call(call: ToolCallRecord) -> dict[str, Any]:
    return {"name": wire_text(str(call.name)), "arguments": _wire_value(call.arguments),
            "result_text": wire_text(str(call.result_text)), "num_images": int(call.num_images),
            "error": bool(call.error)}


def _wire_value(value: Any) -> Any:
    """Tool arguments (parsed JSON) with every string made sendable (see ``wire_text``)."""
    if isinstance(value, str):
        return wire_text(value)
    if isinstance(value, dict):
        return {_wire_value(key): _wire_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_wire_value(item) for item in value]
    return value


def _failed_step(message: str) -> StepResult:
    return StepResult(Observation(f"Environment error: {message}"), 0.0, False, True,
                      {"env_error": message, "success": False})
