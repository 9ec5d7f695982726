"""The scripted backend: replays an env's oracle, a uniformly random declared action, or a fixed list
of responses.

It is a real backend (same interface, same rollout path), which makes it the baseline for
measuring framework overhead and for tests that need a policy with known behaviour.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vista_rl.env import action_reply, declared_actions
from vista_rl.errors import VistaError
from vista_rl.model import Generation, ModelBackend, SamplingParams
from vista_rl.observation import Chat

if TYPE_CHECKING:
    from vista_rl.env import Env
    from vista_rl.rollout.episode import TurnKey

#: ``scripted:NAME`` values that are policies, not response files (``./oracle`` names a file).
POLICIES = ("oracle", "random")


class ScriptedBackend(ModelBackend):
    """``scripted:oracle`` asks the env for its oracle response each turn; ``scripted:random`` picks
    one of the env's declared actions (``action_names``) uniformly each turn, phrased in the env's reply
    format (:func:`vista_rl.env.action_reply`), seeded by the run seed, the episode and the turn (so a
    run is reproducible whatever the batch order or the number of model workers); ``scripted:FILE``
    replays responses from a JSON list or a text file (one per line) in order, cycling;
    ``responses=[...]`` does the same from memory.

    ``per_turn=True`` makes the list a fixed plan for every episode: turn ``k`` of each episode gets
    response ``k`` (the last one repeats), whatever order the episodes are batched in.  That is a
    blind policy: it never looks at an observation (see :mod:`vista_rl.baselines`)."""

    def __init__(self, path: str | None = None, responses: Sequence[str] | None = None,
                 per_turn: bool = False) -> None:
        self.policy = path if path in POLICIES else None
        #: the engine asks the env for each reply (:meth:`env_reply`) and passes them to ``generate``
        self.needs_oracle = self.policy is not None
        self.per_turn = per_turn
        if responses is not None:
            self.responses = list(responses)
        elif path and not self.needs_oracle:
            self.responses = self._read(Path(path))
        else:
            self.responses = []
        if not self.needs_oracle and not self.responses:
            raise ValueError("scripted backend needs path='oracle', path='random', a responses file, "
                             "or responses=[...]")
        self._cursor = 0

    def env_reply(self, env: Env, key: TurnKey) -> str | None:
        """This turn's reply, drawn from the env (called by the rollout engine on its env pool)."""
        if self.policy != "random":
            return env.oracle_response()
        actions = declared_actions(env)
        if not actions:
            raise VistaError(f"scripted:random picks among the env's declared actions, and {key.env_id} "
                             "declares none (no action_names)")
        # str seeds go through SHA-512, so the draw is the same in every process and Python version
        rng = random.Random(f"{key.run_seed}|{key.env_id}|{key.seed}|{key.sample_index}|{key.turn}")
        return action_reply(env, rng.choice(actions))

    @staticmethod
    def _read(path: Path) -> list[str]:
        if not path.exists():
            raise FileNotFoundError(f"scripted responses file {path} does not exist")
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            data = json.loads(text)
            if not isinstance(data, list):
                raise ValueError(f"{path} must hold a JSON list of response strings")
            return [str(item) for item in data]
        return [line for line in text.splitlines() if line.strip()]

    def generate(
        self,
        chats: Sequence[Chat],
        params: SamplingParams,
        oracle_responses: Sequence[str | None] | None = None,
    ) -> list[list[Generation]]:
        outputs: list[list[Generation]] = []
        for index in range(len(chats)):
            samples = []
            for _ in range(params.n):
                if self.needs_oracle:
                    text = (oracle_responses[index] if oracle_responses else None) or ""
                elif self.per_turn:
                    turn = sum(1 for message in chats[index] if message.role == "assistant")
                    text = self.responses[min(turn, len(self.responses) - 1)]
                else:
                    text = self.responses[self._cursor % len(self.responses)]
                    self._cursor += 1
                samples.append(Generation(text=text, finish_reason="stop"))
            outputs.append(samples)
        return outputs
