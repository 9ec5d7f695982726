"""``vista_rl.algorithms.turn_credit.turn_token_advantages``: per-turn rows with a critic get the
estimator's token-level credit over each episode's replies, as one sequence per episode would."""

from __future__ import annotations

import pytest
import torch

import vista_rl
from vista_rl import AdvantageBatch
from vista_rl.algorithms.turn_credit import turn_token_advantages


def gae(batch: AdvantageBatch) -> vista_rl.AdvantageOutput:
    return vista_rl.make_estimator("gae", gamma=0.9, lam=0.8, whiten=False)(batch)


def test_rows_are_one_episode_in_turn_order() -> None:
    """Two turns of one episode, handed over in reverse order, with padding noise in the values: the
    result is GAE over the episode's 3 reply tokens, computed by hand."""
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]])  # row 0 is turn 1, row 1 is turn 0
    values = torch.tensor([[0.5, 99.0, 99.0], [0.2, 0.3, -99.0]])
    advantages, returns = turn_token_advantages(gae, ["e", "e"], [1, 0], [1.0, 0.5], ["g", "g"], mask, values)
    v = [0.2, 0.3, 0.5]
    r = [0.0, 0.5, 1.0]
    delta = [r[t] + 0.9 * (v[t + 1] if t < 2 else 0.0) - v[t] for t in range(3)]
    adv = [0.0, 0.0, delta[2]]
    adv[1] = delta[1] + 0.9 * 0.8 * adv[2]
    adv[0] = delta[0] + 0.9 * 0.8 * adv[1]
    torch.testing.assert_close(advantages, torch.tensor([[adv[2], 0, 0], [adv[0], adv[1], 0]]))
    torch.testing.assert_close(returns[1, :2], torch.tensor(adv[:2]) + torch.tensor(v[:2]))


def test_a_turn_without_trained_tokens_passes_its_reward_on() -> None:
    mask = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    values = torch.zeros((2, 2))
    with_empty, _ = turn_token_advantages(gae, ["e", "e"], [0, 1], [2.0, 1.0], [0, 0], mask, values)
    alone, _ = turn_token_advantages(gae, ["e"], [1], [3.0], [0], mask[1:], values[1:])
    torch.testing.assert_close(with_empty[1], alone[0])
    assert with_empty[0].abs().sum() == 0


def test_bad_shapes_are_named() -> None:
    with pytest.raises(ValueError, match=r"mask and values must both be \[rows=2, tokens\]"):
        turn_token_advantages(gae, ["a", "b"], [0, 0], [0.0, 0.0], [0, 0], torch.ones((2, 3)), torch.ones((2, 4)))
    with pytest.raises(ValueError, match="one entry per row"):
        turn_token_advantages(gae, ["a"], [0, 0], [0.0], [0], torch.ones((1, 3)), torch.ones((1, 3)))
