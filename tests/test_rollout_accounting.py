"""Rollout accounting (issue 28 item 3): the engine's ``model_s`` is the model's own time; the
framework work a backend reports doing inside ``generate`` (encoding chats, the image processor,
decoding) is counted as overhead, not as model time."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin
from vista_rl.rollout import RolloutEngine, episode_specs


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):
    vista_plugin(RolloutTestPlugin())


@dataclass
class _Split:
    encode_s: float = 0.0
    finish_s: float = 0.0


class EncodingBackend(CharTokenBackend):
    """CharTokenBackend that spends 2 ms per call on "encoding" and reports 1 ms of it (fake: the
    reported split is what is under test, not a real processor)."""

    def __init__(self) -> None:
        super().__init__(oracle=True)
        self.timings = _Split()

    def generate(self, chats, params, oracle_responses=None):
        time.sleep(0.002)
        self.timings.encode_s += 0.0008
        self.timings.finish_s += 0.0002
        return super().generate(chats, params, oracle_responses)


def test_backend_framework_time_is_overhead_not_model_time():
    backend = EncodingBackend()
    with RolloutEngine(backend) as engine:
        engine.run(episode_specs("test/counter-v0", range(3)))
    timings = engine.timings
    calls = timings.generate_calls
    assert calls >= 2
    assert timings.backend_framework_s == pytest.approx(0.001 * calls)
    assert timings.model_s >= 0.001 * calls  # the other millisecond of each sleep stays model time
    assert timings.overhead_s >= timings.backend_framework_s
    assert timings.to_dict()["backend_framework_s"] == timings.backend_framework_s


def test_a_backend_without_timings_counts_all_of_generate_as_model_time():
    with RolloutEngine(CharTokenBackend(oracle=True)) as engine:
        engine.run(episode_specs("test/counter-v0", range(2)))
    assert engine.timings.backend_framework_s == 0.0 and engine.timings.model_s > 0
