"""Expert (oracle) trajectories for SFT data: play an env with its own ``oracle_response()``.

Works for any vista env with an oracle (Sokoban, FrozenLake, wrapped toy-text envs).  Each episode
becomes a core :class:`vista_rl.Trajectory`, so the trajectory store and the SFT data builders take it
as they take rollouts.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import vista_rl
from vista_rl import Env, Trajectory, Turn


def expert_trajectory(env: Env, seed: int, *, env_id: str = "", max_turns: int = 50) -> Trajectory:
    """Play one episode of ``env`` from ``seed`` with its oracle.  ``success`` tells whether it
    reached the goal (a slippery FrozenLake can still fail; an env without an oracle stops at once).

    ``Turn.observation`` (and ``Turn.images``) is the observation the oracle *answered*, as in every
    rollout, so SFT pairs each response with what it responded to; the observation after the last
    step goes to ``metadata["final_observation"]``, as the rollout engine records it."""
    observation, _ = env.reset(seed=seed)
    trajectory = Trajectory(env_id=env_id, seed=seed, system_prompt=env.system_prompt(),
                            initial_observation=observation.text, initial_images=list(observation.images))
    for _ in range(max_turns):
        response = env.oracle_response()
        if response is None:
            trajectory.failure = "the oracle has no response for this state"
            break
        result = env.step(response)
        trajectory.turns.append(Turn(observation=observation.text, response=response,
                                     reward=result.reward, images=list(observation.images),
                                     info=_json_ready(result.info)))
        if result.info.get("success"):
            trajectory.success = True
        observation = result.observation
        if result.done:
            trajectory.metadata["final_observation"] = observation.text
            break
    else:
        trajectory.failure = f"not solved within {max_turns} turns"
    return trajectory


def generate_expert_trajectories(env_id: str, seeds: Iterable[int], *, max_turns: int = 50,
                                 only_successful: bool = True, **config: Any) -> Iterator[Trajectory]:
    """Expert trajectories of the registered env ``env_id`` (made with ``config``) for ``seeds``.

    Yields lazily, one episode per seed; with ``only_successful`` episodes that did not reach the
    goal are skipped (so SFT never learns a failed path).  Use the test split for evaluation only:
    ``seeds=env.config.seeds("train")``.
    """
    env = vista_rl.make_env(env_id, **config)
    try:
        for seed in seeds:
            trajectory = expert_trajectory(env, seed, env_id=env_id, max_turns=max_turns)
            if trajectory.success or not only_successful:
                yield trajectory
    finally:
        env.close()


def _json_ready(info: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in info.items()
            if isinstance(value, (str, int, float, bool, list, dict, type(None)))}
