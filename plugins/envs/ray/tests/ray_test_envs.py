"""Envs for the Ray tests, imported inside the actors by ``module:Class`` path (the tests put this
folder on the workers' PYTHONPATH).  They are real envs, small on purpose: a multi-turn counter with
image observations, one that hangs, one that crashes."""

from __future__ import annotations

import time
from typing import Any

from PIL import Image

from vista_rl import Env, Observation, StepResult


class CounterEnv(Env):
    """State starts at ``seed * 10``; ``+k`` adds k; five steps per episode; the image encodes the state."""

    def __init__(self, horizon: int = 5) -> None:
        self.horizon = horizon
        self.state = 0
        self.steps = 0

    def _observe(self) -> Observation:
        return Observation(f"count={self.state} <image>", [Image.new("L", (8, 8), self.state % 256)])

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.state, self.steps = (seed or 0) * 10, 0
        return self._observe(), {"state": self.state}

    def step(self, action: str) -> StepResult:
        self.steps += 1
        try:
            delta = int(action.strip().lstrip("+"))
            valid = True
        except ValueError:
            delta, valid = 0, False
        self.state += delta
        return StepResult(self._observe(), float(delta), False, self.steps >= self.horizon,
                          {"state": self.state, "action_valid": valid})

    def oracle_response(self) -> str | None:
        return "+1"


class SleepyEnv(CounterEnv):
    """Hangs forever on ``sleep`` (a stuck simulator)."""

    def step(self, action: str) -> StepResult:
        if action == "sleep":
            time.sleep(3600)
        return super().step(action)


class CrashEnv(CounterEnv):
    """Raises on ``boom`` (a buggy env)."""

    def step(self, action: str) -> StepResult:
        if action == "boom":
            raise RuntimeError("kaboom")
        return super().step(action)
