"""``Env.observe_tool_turn`` over real HTTP on 127.0.0.1: ``RemoteEnv`` forwards it to ``POST /observe``,
a server without the route (an older one) is a no-op, and a server-side env that raises fails the
call (so the rollout engine fails that episode with the reason)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from vista_plugin_envserver.app import ServerSettings, create_app
from vista_plugin_envserver.client import EnvServerClient, EnvServerError, ItemError, RemoteEnv
from vista_plugin_envserver.server import BackgroundServer

import vista_rl
from vista_rl import Env, Observation, StepResult, ToolCallRecord
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs

SPOT = "grounding/zoom-spot-v0"


class _Recorder(Env):
    """Keeps what it was shown; ``boom`` as the response raises."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, list[ToolCallRecord]]] = []

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("hello"), {}

    def step(self, action: str) -> StepResult:
        return StepResult(Observation("ok"), 0.0, False, False)

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        if response == "boom":
            raise RuntimeError("observer broke")
        self.seen.append((response, list(calls)))


def _recording_server(drop_route: bool = False) -> tuple[BackgroundServer, list[_Recorder]]:
    made: list[_Recorder] = []

    def make(_env_id: str, _config: dict[str, Any]) -> Env:
        made.append(_Recorder())
        return made[-1]

    settings = ServerSettings(env_ids=["test/recorder-v0"])
    app = create_app(settings, make_env=make)
    if drop_route:  # a server from before the route
        app.router.routes = [route for route in app.router.routes if getattr(route, "path", "") != "/observe"]
    return BackgroundServer(settings, app=app), made


def test_remote_env_forwards_the_tool_turn_and_a_raise_fails_the_call() -> None:
    server, made = _recording_server()
    record = ToolCallRecord("zoom", {"coordinate": [3, 4], "note": "\ud800"}, "zoomed \udc80", 1, False)
    with server, RemoteEnv(server.url) as env:
        env.reset(seed=0)
        env.observe_tool_turn("<think>at (3, 4)</think> \ud800", [record])
        ((response, (seen,)),) = made[0].seen
        assert response == "<think>at (3, 4)</think> \ufffd"  # a lone surrogate is sent as U+FFFD
        assert (seen.name, seen.arguments, seen.result_text, seen.num_images, seen.error) == (
            "zoom", {"coordinate": [3, 4], "note": "\ufffd"}, "zoomed \ufffd", 1, False)
        with pytest.raises(EnvServerError, match="observer broke"):
            env.observe_tool_turn("boom", [])
        client = EnvServerClient(server.url)
        with pytest.raises(EnvServerError) as missing:  # an unknown session is not a missing route
            client.observe_tool_turn([("no-such-session", "x", [])])
        assert missing.value.status == 404 and not missing.value.route_missing and client.observes


def test_a_server_without_the_route_is_a_no_op() -> None:
    server, made = _recording_server(drop_route=True)
    with server:
        client = EnvServerClient(server.url)
        (session,) = client.create(1)
        assert client.observe_tool_turn([(session.id, "x", [])]) == [None]
        assert not client.observes  # asked once; later calls are not sent
        assert client.observe_tool_turn([(session.id, "y", [])]) == [None]
        with RemoteEnv(server.url) as env:
            env.reset(seed=0)
            env.observe_tool_turn("<think>(1, 2)</think>", [])  # no raise: the episode goes on
            assert env.step("anything").observation.text == "ok"
        assert all(not recorder.seen for recorder in made)


def test_a_remote_grounded_env_counts_the_engine_run_call_turn() -> None:
    """The rollout engine runs ``search_coordinate`` on the client; the server's zoom-spot env sees
    the call turn through ``/observe``, so its final turn is grounded and cites the call's points."""
    with BackgroundServer(ServerSettings(env_ids=[SPOT])) as server:
        specs = episode_specs("remote", [0, 3], env_config={"url": server.url, "env": SPOT})
        with RolloutEngine(vista_rl.make_model("scripted", path="oracle"), RolloutSection()) as engine:
            trajectories = engine.run(specs)
    for trajectory in trajectories:
        assert trajectory.failure is None and len(trajectory.turns) == 2
        final = trajectory.turns[-1].info
        assert trajectory.success and final["grounded"] is True and final["points_cited"] == 2


def test_item_errors_keep_their_place_in_a_batch() -> None:
    server, _made = _recording_server()
    with server:
        client = EnvServerClient(server.url)
        a, b = client.create(2)
        results = client.observe_tool_turn([(a.id, "boom", []), (b.id, "fine", [])])
        assert isinstance(results[0], ItemError) and "observer broke" in results[0].message
        assert results[1] is None
