"""Each ``RolloutEngine`` call samples with the settings it is given (issue 34 item 3): a trainer passes
a step's sampling to the call instead of setting it on the engine, so nothing one call sampled with
leaks into the next."""

from __future__ import annotations

import pytest

from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin
from vista_rl.config import RolloutSection
from vista_rl.model import SamplingParams
from vista_rl.rollout import RolloutEngine, episode_specs


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):
    vista_plugin(RolloutTestPlugin())


class RecordingBackend(CharTokenBackend):
    """CharTokenBackend that keeps the sampling parameters of every generate call."""

    def __init__(self) -> None:
        super().__init__(oracle=True)
        self.params: list[SamplingParams] = []

    def generate(self, chats, params, oracle_responses=None):
        self.params.append(params)
        return super().generate(chats, params, oracle_responses)


def test_a_call_samples_with_its_own_settings_and_leaves_the_engines_default() -> None:
    backend = RecordingBackend()
    specs = episode_specs("test/counter-v0", range(2), 1, {})
    with RolloutEngine(backend, RolloutSection(max_turns=4), seed=7) as engine:
        default = engine.sampling
        step = SamplingParams(temperature=0.5, max_tokens=3, n=1, seed=11)
        assert all(trajectory.turns for trajectory in engine.run(specs, sampling=step))
        assert backend.params and all(params is step for params in backend.params)
        assert engine.sampling is default  # the call did not set it
        backend.params.clear()
        engine.run(specs)
        assert backend.params and all(params is default for params in backend.params)
