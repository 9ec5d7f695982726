"""``Env.observe_tool_turn``: a reply the rollout engine answers by running tools never reaches
``env.step``, so the engine shows it to the env afterwards (text and call records), on the pool with
the env timeout; an env that raises or hangs there fails its own episode only."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

import vista_rl
from tests.rollout_testkit import RELEASE, CounterEnv, RolloutTestPlugin
from vista_rl import EnvWrapper
from vista_rl.backends.scripted import ScriptedBackend
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs
from vista_rl.rollout.workers import CallPool
from vista_rl.trajectory import ToolCallRecord

CALL = '<think>Look at (3, 4).</think><tool_call>{"name": "zoom", "arguments": {"factor": 3}}</tool_call>'
ANSWER = "<answer>inc</answer>"


class ObservingEnv(CounterEnv):
    """One ``inc`` ends it; every tool turn the engine shows it is kept.  Seed 1 raises in
    ``observe_tool_turn``, seed 2 hangs there."""

    tools = ("test/zoom",)

    def __init__(self) -> None:
        super().__init__(target=1)
        self.seen: list[tuple[str, list[ToolCallRecord]]] = []
        self.seed: int | None = None

    def reset(self, seed: int | None = None) -> Any:
        self.seed = seed
        self.seen = []
        return super().reset(seed)

    def observe_tool_turn(self, response: str, calls: Sequence[ToolCallRecord]) -> None:
        if self.seed == 1:
            raise RuntimeError("observer broke")
        if self.seed == 2:
            RELEASE.wait(30)
        self.seen.append((response, list(calls)))
        SEEN[self.seed] = self.seen


SEEN: dict[int | None, list[tuple[str, list[ToolCallRecord]]]] = {}


class ObservePlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register("test/observing-v0", ObservingEnv)
        register("test/observing-wrapped-v0", lambda **config: EnvWrapper(ObservingEnv(**config)))


@pytest.fixture(autouse=True)
def plugins(vista_plugin: Any) -> Iterator[None]:
    vista_plugin(RolloutTestPlugin())
    vista_plugin(ObservePlugin())
    SEEN.clear()
    RELEASE.clear()  # an earlier test module may have left it set: then nothing would hang
    yield
    RELEASE.set()  # let the hung observer's worker thread end


def run(env_id: str, seeds: list[int], **settings: Any) -> list[vista_rl.Trajectory]:
    backend = ScriptedBackend(responses=[CALL, ANSWER], per_turn=True)
    with RolloutEngine(backend, RolloutSection(**settings)) as engine:
        return engine.run(episode_specs(env_id, seeds))


@pytest.mark.parametrize("env_id", ["test/observing-v0", "test/observing-wrapped-v0"])
def test_the_env_sees_the_tool_turn_the_engine_ran(env_id: str) -> None:
    (trajectory,) = run(env_id, [0])
    assert trajectory.success and trajectory.failure is None
    assert [turn.response for turn in trajectory.turns] == [CALL, ANSWER]
    ((response, calls),) = SEEN[0]  # the call turn only: the answer went to step
    assert response == CALL
    (call,) = calls
    assert (call.name, call.arguments, call.error, call.num_images) == ("zoom", {"factor": 3}, False, 1)
    assert call.result_text.startswith("zoomed x3")
    calls[0].arguments["factor"] = 99  # the env's copy: the trajectory's record is its own
    assert trajectory.turns[0].tool_calls[0].arguments == {"factor": 3}


def test_an_observer_that_raises_or_hangs_fails_only_its_episode() -> None:
    fine, raised, hung, also_fine = run("test/observing-v0", [0, 1, 2, 3], env_timeout_s=0.5)
    for trajectory in (fine, also_fine):
        assert trajectory.success and trajectory.failure is None and len(trajectory.turns) == 2
    assert raised.metadata["stop_reason"] == "env_error" and len(raised.turns) == 1
    assert raised.failure == "env.observe_tool_turn() raised RuntimeError: observer broke"
    assert hung.metadata["stop_reason"] == "env_timeout"
    assert "env.observe_tool_turn() timed out after 0.5s" in (hung.failure or "")


def test_an_env_without_an_observer_runs_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default no-op is never sent to the pool; the tool turn still feeds back as usual."""
    submitted: list[str] = []
    submit = CallPool.submit

    def spy(self: CallPool, fn: Any, *args: Any) -> Any:
        submitted.append(getattr(fn, "__name__", type(fn).__name__))
        return submit(self, fn, *args)

    monkeypatch.setattr(CallPool, "submit", spy)
    (trajectory,) = run("test/tool-counter-v0", [0])
    assert trajectory.failure is None and trajectory.metadata["tool_calls"] == 1
    assert "zoom: zoomed x3" in trajectory.turns[1].observation
    assert "step" in submitted and "observe_tool_turn" not in submitted
