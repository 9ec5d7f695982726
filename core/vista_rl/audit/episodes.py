"""Playing one scripted policy for one episode, on the two paths a reply can take to the reward.

- The **step** path: the reply goes to ``env.step`` as it is, tool calls included (the env records
  them as a tool turn, as in a hand-written loop).
- The **engine** path: the reply goes through the real rollout engine
  (:class:`vista_rl.rollout.RolloutEngine`), exactly as in ``vista eval`` and training: tool calls are
  run by the engine (at most eight a turn, the rest answered as errors), the tool turn is shown to
  the env with ``Env.observe_tool_turn``, and the run config's rollout settings apply (reflection,
  turn and token budgets, tool overrides).

Whatever happens inside, an episode ends as an :class:`Episode`; an env that raises gives an
episode with ``error`` set, never an exception out of here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vista_rl.audit.adversaries import Play, SeedTask
from vista_rl.config import RolloutSection
from vista_rl.env import Env
from vista_rl.model import Generation, ModelBackend, SamplingParams
from vista_rl.observation import Chat
from vista_rl.rollout import EpisodeSpec, RolloutEngine

PathName = Literal["step", "engine"]
PATHS: tuple[PathName, ...] = ("step", "engine")


@dataclass(frozen=True)
class Episode:
    """One policy's episode on one seed and path: what it earned and whether the env said solved."""

    policy: str
    path: PathName
    seed: int
    reward: float
    success: bool
    turns: int
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "path": self.path, "seed": self.seed, "reward": self.reward,
                "success": self.success, "turns": self.turns, "error": self.error}


def step_episode(make: Callable[[], Env], policy: str, task: SeedTask, play: Play, max_turns: int) -> Episode:
    """``play`` through ``env.step`` for up to ``max_turns`` turns."""
    reward, success, turns = 0.0, False, 0
    env: Env | None = None
    try:
        env = make()
        env.reset(seed=task.seed)
        for turn in range(max_turns):
            result = env.step(play(task, turn))
            turns += 1
            reward += result.reward
            if "success" in result.info:
                success = bool(result.info["success"])
            if result.done:
                break
    except Exception as exc:  # noqa: BLE001 - an env that raises is reported with the episode
        return Episode(policy, "step", task.seed, reward, success, turns, f"{type(exc).__name__}: {exc}"[:500])
    finally:
        if env is not None:
            with contextlib.suppress(Exception):  # closing is best effort; the episode is recorded
                env.close()
    return Episode(policy, "step", task.seed, reward, success, turns)


class ScriptedPolicy(ModelBackend):
    """A model backend that answers with an adversary's ``play``: one episode at a time, turn ``k``
    of the episode gets ``play(task, k)``.  :meth:`start` sets the episode; the engine then calls
    :meth:`generate` once a turn.  With ``oracle=True`` it replays the env's oracle instead."""

    def __init__(self, oracle: bool = False) -> None:
        self.needs_oracle = oracle
        self._play: Play | None = None
        self._task: SeedTask | None = None
        self._turn = 0

    def start(self, task: SeedTask, play: Play | None) -> None:
        self._task, self._play, self._turn = task, play, 0

    def generate(self, chats: Sequence[Chat], params: SamplingParams,
                 oracle_responses: Sequence[str | None] | None = None) -> list[list[Generation]]:
        outputs: list[list[Generation]] = []
        for index in range(len(chats)):
            if self.needs_oracle:
                text = (oracle_responses[index] if oracle_responses else None) or ""
            else:
                if self._play is None or self._task is None:
                    raise RuntimeError("ScriptedPolicy.start() was not called")
                text = self._play(self._task, self._turn)
            self._turn += 1
            outputs.append([Generation(text=text, finish_reason="stop")])
        return outputs


def engine_episode(engine: RolloutEngine, policy_backend: ScriptedPolicy, env_id: str,
                   env_config: Mapping[str, Any], policy: str, task: SeedTask, play: Play | None) -> Episode:
    """One episode of ``play`` (``None``: the oracle, if ``policy_backend`` replays it) through the
    rollout engine, on ``task.seed``."""
    policy_backend.start(task, play)
    spec = EpisodeSpec(env_id, task.seed, 0, dict(env_config))
    try:
        (trajectory,) = engine.run([spec])
    except Exception as exc:  # noqa: BLE001 - the engine catches env errors; this guards the rest
        return Episode(policy, "engine", task.seed, 0.0, False, 0, f"{type(exc).__name__}: {exc}"[:500])
    return Episode(policy, "engine", task.seed, trajectory.total_reward, bool(trajectory.success),
                   trajectory.num_turns, trajectory.failure[:500] if trajectory.failure else None)


def audit_engine(backend: ScriptedPolicy, settings: RolloutSection, seed: int) -> RolloutEngine:
    """A rollout engine for the audit: the run config's rollout settings, one episode at a time."""
    one_at_a_time = settings.model_copy(update={"batch_size": 1, "group_size": 1})
    return RolloutEngine(backend, one_at_a_time, seed=seed)
