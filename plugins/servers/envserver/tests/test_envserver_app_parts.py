"""The env server's parts, each without a server (issue 34 item 5): the request checks
(``app_validation``), the state object and its lifespan (``app_state``), the worker-thread work
(``app_work``) and the route handlers (``app_handlers``) called with a Starlette ``Request``.
The real server over HTTP is tested in test_envserver_http.py and its siblings."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from PIL import Image
from starlette.requests import Request
from vista_plugin_envserver import app_handlers, app_work
from vista_plugin_envserver.app import create_app
from vista_plugin_envserver.app_state import EnvServerState, default_env_factory, lifespan, state_of
from vista_plugin_envserver.app_validation import (
    CreateBody,
    HTTPError,
    ObserveItem,
    ResetBody,
    ResetItem,
    SessionsBody,
    StepItem,
    admit_create,
    decode,
    lookup,
    parse_body,
)
from vista_plugin_envserver.codec import CONTENT_TYPE, pack, unpack
from vista_plugin_envserver.limits import ClientLimits, KeyRule
from vista_plugin_envserver.observe_limits import ObserveLimits
from vista_plugin_envserver.sessions import Session, SessionManager
from vista_plugin_envserver.settings import ServerSettings

from vista_rl import Env, Observation, StepResult

ODD = "oddshape/odd-colour-v0"
VQA = "vqa/short-answer-v0"


class _Toy(Env):
    """Answers in plain text; ``boom`` raises in step, ``big`` renders a frame past the limits."""

    def __init__(self, size: int = 4, **_config: Any) -> None:
        self.size = size
        self.closed = False

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation(f"seed {seed} <image>", [Image.new("RGB", (self.size, self.size))]), {"seed": seed}

    def step(self, action: str) -> StepResult:
        if action == "boom":
            raise RuntimeError("kaboom")
        if action == "big":
            return StepResult(Observation("big <image>", [Image.new("RGB", (64, 64))]), 0.0, False, False)
        return StepResult(Observation(f"got {action}"), 1.0, True, False)

    def oracle_response(self) -> str | None:
        if self.size == 13:
            raise RuntimeError("no oracle today")
        return "the answer"

    def close(self) -> None:
        self.closed = True


def _toy_state(**settings: Any) -> EnvServerState:
    return EnvServerState.build(ServerSettings(env_ids=["test/toy-v0"], **settings),
                                lambda _id, config: _Toy(**config))


def _refused(call: Any, *args: Any) -> HTTPError:
    with pytest.raises(HTTPError) as caught:
        call(*args)
    return caught.value


# ------------------------------------------------------------------------------- validation
def test_decode_reads_json_and_msgpack_maps_and_refuses_the_rest() -> None:
    assert decode(b'{"a": 1}', "application/json", 4) == {"a": 1}
    assert decode(pack({"a": [1]}), CONTENT_TYPE, 4) == {"a": [1]}
    assert decode(b"", CONTENT_TYPE, 4) == {} and decode(b"", "application/json", 4) == {}
    assert "malformed body" in _refused(decode, b"{nope", "application/json", 4).message
    deep = _refused(decode, pack({"a": [[[[[1]]]]]}), CONTENT_TYPE, 4)
    assert deep.status == 400 and "nested deeper than 4 levels" in deep.message
    assert "expected a map at the top level, got list" in _refused(decode, pack([1]), CONTENT_TYPE, 4).message


def test_parse_body_checks_schema_and_batch_size() -> None:
    settings = ServerSettings(env_ids=["x"], max_batch=2)
    body = parse_body(settings, ResetBody, pack({"items": [{"session": "a", "seed": 3}]}), CONTENT_TYPE)
    assert isinstance(body, ResetBody) and body.items[0].seed == 3 and body.image_encoding == "raw"
    unknown = _refused(parse_body, settings, SessionsBody, pack({"sessions": [], "eval": "os:abort"}), CONTENT_TYPE)
    assert unknown.status == 422 and "eval" in unknown.message  # unknown keys are refused, never used
    assert _refused(parse_body, settings, ResetBody, pack({"items": "x"}), CONTENT_TYPE).status == 422
    batch = _refused(parse_body, settings, SessionsBody, pack({"sessions": ["a", "b", "c"]}), CONTENT_TYPE)
    assert batch.status == 413 and "batch of 3 exceeds the limit of 2" in batch.message


def test_lookup_finds_all_or_names_the_unknown_ids() -> None:
    manager = SessionManager(lambda _id, config: _Toy(), max_sessions=8)
    made = manager.create("test/toy-v0", {}, 2)
    assert lookup(manager, [made[1].id, made[0].id]) == [made[1], made[0]]
    missing = _refused(lookup, manager, [made[0].id] + [f"gone{i}" for i in range(7)])
    assert missing.status == 404 and "'gone0'" in missing.message and "'gone4'" in missing.message
    assert "'gone5'" not in missing.message and missing.message.endswith("(and 2 more)")


def test_admit_create_checks_the_env_id_and_client_config() -> None:
    settings = ServerSettings(env_ids=["a/x-v0", "b/y-v0"], limits=ClientLimits(allowed={"size": KeyRule(maximum=8)}))
    assert admit_create(settings, CreateBody()) == "a/x-v0"
    assert admit_create(settings, CreateBody(env_id="b/y-v0", config={"size": 4})) == "b/y-v0"
    unhosted = _refused(admit_create, settings, CreateBody(env_id="c/z-v0"))
    assert unhosted.status == 404 and "not 'c/z-v0'" in unhosted.message
    assert _refused(admit_create, settings, CreateBody(config={"path": "/etc"})).status == 403
    assert _refused(admit_create, settings, CreateBody(config={"size": 9})).status == 422
    closed = ServerSettings(env_ids=["a/x-v0"], allow_client_config=False)
    assert admit_create(closed, CreateBody()) == "a/x-v0"
    assert _refused(admit_create, closed, CreateBody(config={"size": 1})).status == 403


# ---------------------------------------------------------------------------------- state
def test_state_build_needs_an_env_and_uses_the_registry_by_default() -> None:
    with pytest.raises(ValueError, match="at least one env id"):
        EnvServerState.build(ServerSettings(env_ids=[]))
    settings = ServerSettings(env_ids=[ODD], env_config={ODD: {"grid": 2, "cell_size": 24}})
    env = default_env_factory(settings)(ODD, {"cell_size": 28})  # the client's value over the operator's
    observation, _ = env.reset(seed=0)
    assert observation.images[0].size == (56, 56)
    state = EnvServerState.build(settings)
    assert state.limits is settings.limits and state.sessions.max_sessions == settings.max_sessions
    state.shutdown()


def test_state_runs_work_off_the_event_loop_and_shuts_down() -> None:
    state = _toy_state()
    made = state.sessions.create("test/toy-v0", {}, 2)
    where = asyncio.run(state.run(lambda: threading.current_thread().name))
    assert where.startswith("vista-env")
    state.shutdown()
    assert all(s.env.closed for s in made) and state.sessions.stats()["open"] == 0  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        state.executor.submit(print)


def test_lifespan_reaps_idle_sessions_and_closes_the_rest() -> None:
    app = create_app(ServerSettings(env_ids=["test/toy-v0"], idle_timeout_s=0.1), lambda _id, _c: _Toy())
    state = app.state.env_server

    async def scenario() -> tuple[int, int]:
        async with lifespan(app):
            idle = state.sessions.create("test/toy-v0", {}, 1)[0]
            for _ in range(200):
                await asyncio.sleep(0.05)
                if state.sessions.stats()["expired"]:
                    break
            kept = state.sessions.create("test/toy-v0", {}, 1)[0]
            assert idle.env.closed and not kept.env.closed
        return state.sessions.stats()["expired"], int(kept.env.closed)

    assert asyncio.run(scenario()) == (1, 1)


# ----------------------------------------------------------------------------------- work
def test_each_session_fails_only_the_item_that_raises_or_passes_a_limit() -> None:
    state = _toy_state(limits=ClientLimits(max_image_pixels=100))
    sessions = state.sessions.create("test/toy-v0", {}, 3)
    items = [StepItem(session=s.id, action=a) for s, a in zip(sessions, ("boom", "ok", "big"), strict=True)]
    results = app_work.each_session(sessions, items, lambda s, i: app_work.step_one(state.limits, "raw", s, i), "step")
    assert results[0] == {"ok": False, "error": "step raised RuntimeError: kaboom"}
    assert results[1]["ok"] and results[1]["reward"] == 1.0 and sessions[1].steps == 1
    assert not results[2]["ok"] and results[2]["status"] == 413 and "64x64" in results[2]["error"]
    assert sessions[2].steps == 0  # a frame past the limit does not count as a step
    state.shutdown()


def test_reset_one_starts_a_new_episode_and_its_observe_budget() -> None:
    state = _toy_state()
    session = state.sessions.create("test/toy-v0", {}, 1)[0]
    session.observed.turns = 5
    result = app_work.reset_one(state.limits, "png", session, ResetItem(session=session.id, seed=9))
    assert result["info"] == {"seed": 9} and session.episodes == 1 and session.observed.turns == 0
    decoded = unpack(pack(result["observation"]))
    assert decoded["text"] == "seed 9 <image>"
    state.shutdown()


def test_observe_turn_refuses_an_item_past_a_limit_before_the_env_sees_it() -> None:
    seen: list[str] = []

    class Observer(_Toy):
        def observe_tool_turn(self, response: str, calls: Any) -> None:
            seen.append(response)

    session = Session("s", "test/toy-v0", Observer(), 0.0, 0.0)
    limits = ObserveLimits(max_text_chars=10, max_turns_per_episode=1)
    assert app_work.observe_turn(limits, session, ObserveItem(session="s", response="short")) == {}
    results = app_work.each_session([session, session], [ObserveItem(session="s", response="x" * 11),
                                                         ObserveItem(session="s", response="again")],
                                    lambda s, i: app_work.observe_turn(limits, s, i), "observe_tool_turn")
    assert [r["ok"] for r in results] == [False, False] and seen == ["short"]
    assert session.observed.turns == 1


def test_oracle_responses_are_none_where_the_env_raises() -> None:
    sessions = [Session("a", "t", _Toy(), 0.0, 0.0), Session("b", "t", _Toy(size=13), 0.0, 0.0)]
    assert app_work.oracle_responses(sessions) == ["the answer", None]


def test_create_sessions_probes_client_config_and_maps_every_failure() -> None:
    state = _toy_state(max_sessions=3, limits=ClientLimits(max_image_pixels=100),
                       config_classes={"test/toy-v0": None})
    made = app_work.create_sessions(state, "test/toy-v0", {"size": 8}, 2)
    assert [m["env_id"] for m in made] == ["test/toy-v0"] * 2 and state.sessions.stats()["open"] == 2
    too_big = _refused(app_work.create_sessions, state, "test/toy-v0", {"size": 11}, 1)
    assert too_big.status == 413 and "refused" in too_big.message
    assert state.sessions.stats()["open"] == 2  # the probed sessions were closed
    cap = _refused(app_work.create_sessions, state, "test/toy-v0", {}, 5)
    assert cap.status == 429 and "session cap" in cap.message
    crash = _refused(app_work.create_sessions, state, "test/toy-v0", {"size": "four"}, 1)
    assert crash.status == 400 and "could not create env 'test/toy-v0'" in crash.message
    state.shutdown()


def test_create_sessions_refuses_host_paths_from_a_client(tmp_path: Path) -> None:
    """Security unchanged by the split: a client record naming an absolute host path is refused, and
    so is a server-only field; nothing is built."""
    (tmp_path / "in.png").write_bytes(b"")
    state = EnvServerState.build(ServerSettings(env_ids=[VQA], records_root=str(tmp_path)))
    record = {"id": "r", "dataset": "c", "question": "q?", "answer": "a", "images": ["/etc/shadow"]}
    absolute = _refused(app_work.create_sessions, state, VQA, {"records": [record]}, 1)
    assert absolute.status == 422 and "absolute" in absolute.message
    server_only = _refused(app_work.create_sessions, state, VQA, {"records_path": "/etc/passwd"}, 1)
    assert server_only.status == 403 and "'records_path'" in server_only.message
    assert state.sessions.stats()["created"] == 0
    state.shutdown()


# ------------------------------------------------------------------------------- handlers
def _request(app: FastAPI, path: str = "/", body: bytes = b"", content_type: str = CONTENT_TYPE) -> Request:
    """A Starlette request into ``app`` as an ASGI server would hand it over."""
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "path": path, "app": app, "query_string": b"",
             "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", content_type.encode())]}
    return Request(scope, receive)


def test_create_app_builds_one_state_and_wires_every_route() -> None:
    settings = ServerSettings(env_ids=["test/toy-v0"], token="t")
    app = create_app(settings, lambda _id, _c: _Toy())
    state = state_of(_request(app))
    assert isinstance(state, EnvServerState) and state.settings is settings and app.state.sessions is state.sessions
    paths = {getattr(route, "path", "") for route in app.router.routes}
    assert {"/health", "/sessions", "/reset", "/step", "/oracle", "/observe", "/close"} <= paths
    health = asyncio.run(app_handlers.health(_request(app, "/health")))
    assert json.loads(bytes(health.body)) == {"status": "ok", "envs": ["test/toy-v0"], "sessions": state.sessions.stats(),
                                              "auth": True}
    state.shutdown()


def test_handlers_play_an_episode_without_a_server() -> None:
    app = create_app(ServerSettings(env_ids=["test/toy-v0"]), lambda _id, _c: _Toy())
    state = state_of(_request(app))

    async def call(handler: Any, path: str, message: dict[str, Any]) -> Any:
        return unpack((await handler(_request(app, path, pack(message)))).body)

    async def scenario() -> list[Any]:
        (session,) = (await call(app_handlers.create_sessions, "/sessions", {}))["sessions"]
        sid = session["id"]
        reset = await call(app_handlers.reset, "/reset", {"items": [{"session": sid, "seed": 4}]})
        step = await call(app_handlers.step, "/step", {"items": [{"session": sid, "action": "go"}]})
        oracle = await call(app_handlers.oracle, "/oracle", {"sessions": [sid]})
        observe = await call(app_handlers.observe, "/observe", {"items": [{"session": sid, "response": "r"}]})
        closed = await call(app_handlers.close, "/close", {"sessions": [sid, sid]})
        return [reset, step, oracle, observe, closed]

    reset, step, oracle, observe, closed = asyncio.run(scenario())
    assert reset["results"][0]["ok"] and reset["results"][0]["info"] == {"seed": 4}
    assert step["results"][0]["ok"] and step["results"][0]["reward"] == 1.0
    assert oracle == {"results": ["the answer"]} and observe == {"results": [{"ok": True}]}
    assert closed == {"closed": 1}
    state.shutdown()


def test_handlers_refuse_bad_requests_with_the_status_that_says_why() -> None:
    app = create_app(ServerSettings(env_ids=["test/toy-v0"], max_body_bytes=64), lambda _id, _c: _Toy())
    state = state_of(_request(app))

    async def refusal(handler: Any, body: bytes, content_type: str = CONTENT_TYPE) -> HTTPError:
        with pytest.raises(HTTPError) as caught:
            await handler(_request(app, "/", body, content_type))
        return caught.value

    async def scenario() -> list[HTTPError]:
        return [await refusal(app_handlers.step, b"x" * 65),
                await refusal(app_handlers.reset, pack({"items": [{"session": "nope"}]})),
                await refusal(app_handlers.create_sessions, b'{"env_id": "other/v0"}', "application/json")]

    big, unknown, unhosted = asyncio.run(scenario())
    assert big.status == 413 and unknown.status == 404 and "'nope'" in unknown.message
    assert unhosted.status == 404 and "not 'other/v0'" in unhosted.message
    assert state.sessions.stats()["created"] == 0
    state.shutdown()


def test_error_responses_are_json_with_status_and_escape_surrogates() -> None:
    response = asyncio.run(app_handlers.http_error(None, HTTPError(422, "bad \ud800 text")))  # type: ignore[arg-type]
    assert response.status_code == 422
    assert json.loads(bytes(response.body)) == {"error": "bad \\ud800 text", "status": 422}
    assert app_handlers.error_response(401, "token").headers["www-authenticate"] == "Bearer"
    app = create_app(ServerSettings(env_ids=["test/toy-v0"]), lambda _id, _c: _Toy())
    crash = asyncio.run(app_handlers.unexpected(_request(app, "/step"), KeyError("k")))
    assert crash.status_code == 500 and "internal error: KeyError" in json.loads(bytes(crash.body))["error"]
    app.state.env_server.shutdown()
