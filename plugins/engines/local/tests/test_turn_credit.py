"""``algorithm.turn_credit``: how an episode's outcome reaches the turns of per-turn sequences."""

from __future__ import annotations

import pytest
import torch
from vista_plugin_local.advantages import make_estimator, per_turn_advantages
from vista_plugin_local.chat_tokens import EpisodeTokens
from vista_plugin_local.image_input import ImageInput
from vista_plugin_local.samples import TrainSample

from vista_rl import Trajectory

PROMPT, ZOOM_A, ZOOM_B = [1, 2, 3], [4, 5], [4, 6]


def _turn(trajectory: Trajectory, prompt: list[int], image: str, reply: list[int], reward: float,
          turn: int) -> TrainSample:
    picture = ImageInput(torch.zeros(1), digest=image)
    tokens = EpisodeTokens(prompt + reply, [0] * len(prompt) + [1] * len(reply), [len(prompt) + len(reply) - 1],
                           [picture])
    return TrainSample(trajectory, tokens, 0, [reward], turn)


def _episode(seed: int, call: list[int], zoom: str, answer: list[int], right: bool) -> list[TrainSample]:
    trajectory = Trajectory(env_id="x", seed=seed)
    return [_turn(trajectory, PROMPT, "view", call, 0.0, 0),
            _turn(trajectory, ZOOM_A, zoom, answer, 1.0 if right else 0.0, 1)]


def _group() -> list[TrainSample]:
    """Five samples of one seed: four make the same call and see the same zoom, two of them answer
    right; the fifth calls elsewhere, sees another zoom and answers right."""
    return (_episode(0, [9, 9], "zoom-a", [7], True) + _episode(0, [9, 9], "zoom-a", [7], True)
            + _episode(0, [9, 9], "zoom-a", [8], False) + _episode(0, [9, 9], "zoom-a", [8], False)
            + _episode(0, [9, 5], "zoom-b", [7], True))


def test_state_credit_averages_a_shared_call_and_gives_the_answer_the_split() -> None:
    """The five calls come from one state: returns 1, 1, 0, 0 for the shared call and 1 for the odd
    one, so GRPO over the state gives each its own advantage and the four alike share their mean; the
    odd call keeps its own.  The answers after the shared zoom split 2:2, so they get +-GRPO within
    that context; the answer after the lone zoom has no baseline and gets 0."""
    samples = _group()
    advantages = per_turn_advantages(make_estimator("grpo", {}), samples, width=4, credit="state")
    first = [float(advantages[i, sample.tokens.loss_mask.index(1)]) for i, sample in enumerate(samples)]
    calls, answers = torch.tensor(first[0::2]), torch.tensor(first[1::2])
    returns = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0])
    each = (returns - returns.mean()) / (returns.std() + 1e-6)
    expected_calls = torch.cat([each[:4].mean().repeat(4), each[4:]])
    assert calls.tolist() == pytest.approx(expected_calls.tolist(), abs=1e-4)
    assert calls[0] < 0 < calls[4]
    assert answers.tolist() == pytest.approx([0.866, 0.866, -0.866, -0.866, 0.0], abs=1e-3)
    # Untrained (prompt) positions carry nothing.
    assert advantages[0, :3].abs().sum() == 0 and advantages[1, :2].abs().sum() == 0
    # Without the odd sample every call is the same reply from the same state: no credit at all.
    alike = per_turn_advantages(make_estimator("grpo", {}), samples[:8], width=4, credit="state")
    assert alike[0::2].abs().sum() == 0
    assert alike[1::2, 2].tolist() == pytest.approx([0.866, 0.866, -0.866, -0.866], abs=1e-3)


def test_turn_credit_episode_divides_by_the_turns_and_turn_does_not() -> None:
    samples = _group()
    estimator = make_estimator("grpo", {})
    divided = per_turn_advantages(estimator, samples, width=4, credit="episode")
    whole = per_turn_advantages(estimator, samples, width=4, credit="turn")
    assert torch.allclose(whole, 2 * divided)
    returns = torch.tensor([1.0, 1.0, 0.0, 0.0, 1.0])
    grpo = (returns - returns.mean()) / (returns.std() + 1e-6)
    assert [float(whole[2 * i, 3]) for i in range(5)] == pytest.approx(grpo.tolist(), abs=1e-4)


def test_turn_credit_needs_per_turn_sequences() -> None:
    from vista_rl.config import RunConfig

    with pytest.raises(ValueError, match="turn_credit: state needs per-turn sequences"):
        RunConfig.model_validate({"env": {"id": "x"}, "algorithm": {"turn_credit": "state"},
                                  "rollout": {"sequences": "episode"}})
    run = RunConfig.model_validate({"env": {"id": "x"}, "algorithm": {"turn_credit": "state"},
                                    "rollout": {"window_size": 0}})
    assert run.algorithm.turn_credit == "state"
