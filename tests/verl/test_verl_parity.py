"""Our estimators against verl's own (``verl.trainer.ppo.core_algos``) on random multi-turn batches.

Runs in the separate ``.venvs/verl`` environment (``bash scripts/test.d/verl.sh``); skipped in the
main environment, which has no verl.  Inputs are float64 so differences are ours, not rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")

from verl.trainer.config import AlgoConfig  # noqa: E402

from tests.test_estimators import random_batch  # noqa: E402
from vista_rl.algorithms import estimators as est  # noqa: E402

SEEDS = [0, 1, 2, 3]


def verl_batch(seed: int, rows: int = 24, tokens: int = 120, group: int = 4):
    """A random batch for both sides; verl's uids are strings in a numpy object array."""
    batch = random_batch(rows=rows, tokens=tokens, seed=seed)
    batch.group_ids = torch.tensor([row // group for row in range(rows)])
    batch.group_ids[-1] = 99  # a singleton group
    uids = np.array([f"uid-{int(g)}" for g in batch.group_ids], dtype=object)
    return batch, uids


def on_mask(tensor: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return tensor * mask


def close(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs.to(ours.dtype), rtol=1e-6, atol=1e-6)


def test_verl_registry_holds_the_functions_we_compare_with():
    for name, fn in [("gae", core_algos.compute_gae_advantage_return),
                     ("grpo", core_algos.compute_grpo_outcome_advantage),
                     ("rloo", core_algos.compute_rloo_outcome_advantage),
                     ("reinforce_plus_plus", core_algos.compute_reinforce_plus_plus_outcome_advantage),
                     ("reinforce_plus_plus_baseline",
                      core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage)]:
        assert core_algos.get_adv_estimator_fn(name) is fn


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("gamma", "lam"), [(1.0, 1.0), (0.99, 0.95), (0.7, 0.3)])
def test_masked_gae_equals_verl_gae(seed, gamma, lam):
    """verl's GAE skips observation tokens (mask 0): that is our masked_gae."""
    batch, _ = verl_batch(seed)
    mask = batch.response_mask
    adv, ret = core_algos.compute_gae_advantage_return(batch.token_rewards, batch.values, mask, gamma, lam)
    ours = est.masked_gae(batch, gamma=gamma, lam=lam)
    close(ours.advantages, on_mask(adv, mask))
    close(on_mask(ours.returns, mask), on_mask(ret, mask))


@pytest.mark.parametrize("seed", SEEDS)
def test_plain_gae_equals_verl_gae_on_single_turn_rows(seed):
    """With one contiguous response per row there is nothing to skip: plain GAE agrees with verl."""
    batch, _ = verl_batch(seed)
    positions = torch.arange(batch.response_mask.shape[1])
    first = batch.response_mask.argmax(dim=1, keepdim=True)
    length = batch.response_mask.sum(dim=1, keepdim=True)
    batch.response_mask = ((positions >= first) & (positions < first + length)).double()
    batch.advantage_mask = batch.response_mask.clone()
    adv, _ = core_algos.compute_gae_advantage_return(batch.token_rewards, batch.values, batch.response_mask,
                                                     0.99, 0.95)
    close(est.gae(batch, gamma=0.99, lam=0.95).advantages, on_mask(adv, batch.response_mask))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("norm", [True, False])
def test_grpo_and_dr_grpo_equal_verl(seed, norm):
    batch, uids = verl_batch(seed)
    for verl_fn in (core_algos.compute_grpo_outcome_advantage, core_algos.compute_grpo_vectorized_outcome_advantage):
        adv, ret = verl_fn(batch.token_rewards.clone(), batch.response_mask, uids, norm_adv_by_std_in_grpo=norm)
        ours = est.grpo(batch, norm_by_std=norm) if norm else est.dr_grpo(batch)
        close(ours.advantages, adv)
        close(ours.returns, ret)


@pytest.mark.parametrize("seed", SEEDS)
def test_rloo_equals_verl(seed):
    batch, uids = verl_batch(seed)
    ours = est.rloo(batch).advantages
    adv, _ = core_algos.compute_rloo_outcome_advantage(batch.token_rewards.clone(), batch.response_mask, uids)
    close(ours, adv)
    # verl's two RLOO versions disagree on a lone sample: ``rloo`` keeps its score (as we do),
    # ``rloo_vectorized`` zeroes it.  Everywhere else they agree with us.
    vectorised, _ = core_algos.compute_rloo_vectorized_outcome_advantage(
        batch.token_rewards.clone(), batch.response_mask, uids)
    close(ours[:-1], vectorised[:-1])
    assert vectorised[-1].abs().max() == 0 and ours[-1].abs().max() > 0


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma", [1.0, 0.9, 0.3])
def test_reinforce_plus_plus_equals_verl(seed, gamma):
    batch, _ = verl_batch(seed)
    adv, ret = core_algos.compute_reinforce_plus_plus_outcome_advantage(
        batch.token_rewards, batch.response_mask, config=AlgoConfig(gamma=gamma))
    ours = est.reinforce_plus_plus(batch, gamma=gamma)
    close(ours.advantages, adv)
    close(ours.returns, ret)


@pytest.mark.parametrize("seed", SEEDS)
def test_reinforce_plus_plus_baseline_equals_verl(seed):
    batch, uids = verl_batch(seed)
    adv, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(
        batch.token_rewards.clone(), batch.response_mask, uids)
    close(est.reinforce_plus_plus_baseline(batch).advantages, adv)
