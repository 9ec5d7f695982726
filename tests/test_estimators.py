"""Advantage estimators: registry + SDK conformance, hand-computed cases, and agreement with plain
per-token loop references (written here, straight from the VAGEN/verl recursions) on random
multi-turn batches."""

from __future__ import annotations

import math
import random

import pytest
import torch

import vista_rl
from vista_rl.algorithms import estimators as est
from vista_rl.algorithms.scan import block_length, reverse_linear_scan
from vista_rl.builtin.estimators import BUILTIN_ESTIMATORS
from vista_rl.estimator import AdvantageBatch
from vista_rl_sdk import check_estimator

ALL_IDS = sorted(BUILTIN_ESTIMATORS)


# ------------------------------------------------------------------------------ random batches
def random_batch(rows: int = 10, tokens: int = 80, max_turns: int = 5, seed: int = 0, split_masks: bool = False,
                 stray_rewards: bool = True) -> AdvantageBatch:
    """Rows of ``obs resp obs resp ...`` with random lengths, then padding.  Rewards at turn ends
    (and, with ``stray_rewards``, on a few other tokens).  ``split_masks`` drops some assistant
    tokens from the advantage mask so the two masks differ."""
    rng = random.Random(seed)
    loss = torch.zeros(rows, tokens)
    ends = torch.zeros(rows, tokens)
    rewards = torch.zeros(rows, tokens, dtype=torch.float64)
    position = 0
    for row in range(rows):
        position = rng.randint(0, 4)
        for _ in range(rng.randint(1, max_turns)):
            length = rng.randint(1, 9)
            if position + length > tokens:
                break
            loss[row, position:position + length] = 1
            ends[row, position + length - 1] = 1
            rewards[row, position + length - 1] = rng.uniform(-1, 2)
            position += length + rng.randint(0, 7)
        if stray_rewards:
            for _ in range(2):
                rewards[row, rng.randrange(tokens)] += rng.uniform(-1, 1)
    advantage = loss.clone()
    if split_masks:
        drop = torch.rand(rows, tokens, generator=torch.Generator().manual_seed(seed)) < 0.2
        advantage = advantage * (~drop | ends.bool())
    values = torch.randn(rows, tokens, generator=torch.Generator().manual_seed(seed + 1),
                         dtype=torch.float64)
    return AdvantageBatch(token_rewards=rewards, response_mask=loss, advantage_mask=advantage,
                          group_ids=torch.tensor([row // 3 for row in range(rows)]), values=values, turn_ends=ends)


# ---------------------------------------------------------------------------- loop references
def ref_whiten(adv: torch.Tensor, loss: torch.Tensor, advantage_mask: torch.Tensor) -> torch.Tensor:
    picked = [adv[b, t].item() for b in range(adv.shape[0]) for t in range(adv.shape[1]) if loss[b, t]]
    mean = sum(picked) / len(picked)
    var = sum((x - mean) ** 2 for x in picked) / (len(picked) - 1)
    return ((adv - mean) / math.sqrt(var + 1e-8)) * advantage_mask


def ref_gae_row(r: list[float], v: list[float], steps: list[int], gamma: float, lam: float):
    adv, ret = [0.0] * len(r), [0.0] * len(r)
    last, next_value = 0.0, 0.0
    for p in reversed(steps):
        delta = r[p] + gamma * next_value - v[p]
        last = delta + gamma * lam * last
        adv[p], ret[p] = last, last + v[p]
        next_value = v[p]
    return adv, ret


def ref_gae(batch: AdvantageBatch, gamma: float, lam: float, masked: bool, whiten: bool = True):
    adv = torch.zeros_like(batch.token_rewards)
    ret = torch.zeros_like(batch.token_rewards)
    for b in range(adv.shape[0]):
        mask = batch.advantage_mask[b]
        if masked:
            steps = [t for t in range(adv.shape[1]) if mask[t]]
        else:
            active = [t for t in range(adv.shape[1]) if mask[t] or batch.response_mask[b, t]]
            steps = list(range(active[-1] + 1)) if active else []
        a, r = ref_gae_row(batch.token_rewards[b].tolist(), batch.values[b].tolist(), steps, gamma, lam)
        adv[b], ret[b] = torch.tensor(a, dtype=adv.dtype), torch.tensor(r, dtype=adv.dtype)
    if whiten:
        return ref_whiten(adv, batch.response_mask, batch.advantage_mask), ret
    return adv * batch.advantage_mask, ret


def ref_turns(batch: AdvantageBatch, b: int, turn_gamma: float, turn_lam: float):
    """(turn end positions, token ranges, turn advantages) of row ``b``, by the VAGEN loops."""
    tokens = batch.token_rewards.shape[1]
    ends = [t for t in range(tokens) if batch.turn_ends[b, t]]
    r, v = batch.token_rewards[b].tolist(), batch.values[b].tolist()
    ranges = [range(ends[k - 1] + 1 if k else 0, ends[k] + 1) for k in range(len(ends))]
    turn_rewards = [sum(r[t] for t in span) for span in ranges]
    if ends:
        turn_rewards[-1] += sum(r[ends[-1] + 1:])
    turn_adv = [0.0] * len(ends)
    last = 0.0
    for k in reversed(range(len(ends))):
        next_value = v[ends[k + 1]] if k + 1 < len(ends) else 0.0
        delta = turn_rewards[k] + turn_gamma * next_value - v[ends[k]]
        last = delta + turn_gamma * turn_lam * last
        turn_adv[k] = last
    return ends, ranges, turn_adv


def ref_bilevel(batch: AdvantageBatch, gamma: float, lam: float, turn_gamma: float, turn_lam: float,
                whiten: bool = True):
    adv = torch.zeros_like(batch.token_rewards)
    ret = torch.zeros_like(batch.token_rewards)
    for b in range(adv.shape[0]):
        v = batch.values[b].tolist()
        ends, ranges, turn_adv = ref_turns(batch, b, turn_gamma, turn_lam)
        for k, span in enumerate(ranges):
            steps = [t for t in span if batch.advantage_mask[b, t] or t == ends[k]]
            last, next_value = turn_adv[k], None
            for p in reversed(steps):
                if p != ends[k]:
                    last = gamma * next_value - v[p] + gamma * lam * last
                adv[b, p], ret[b, p] = last, last + v[p]
                next_value = v[p]
    if whiten:
        return ref_whiten(adv, batch.response_mask, batch.advantage_mask), ret
    return adv * batch.advantage_mask, ret


def ref_turnwise(batch: AdvantageBatch, turn_gamma: float, turn_lam: float, whiten: bool = True):
    adv = torch.zeros_like(batch.token_rewards)
    ret = torch.zeros_like(batch.token_rewards)
    for b in range(adv.shape[0]):
        v = batch.values[b].tolist()
        ends, ranges, turn_adv = ref_turns(batch, b, turn_gamma, turn_lam)
        for k, span in enumerate(ranges):
            for t in span:
                if batch.advantage_mask[b, t]:
                    adv[b, t], ret[b, t] = turn_adv[k], turn_adv[k] + v[ends[k]]
    if whiten:
        return ref_whiten(adv, batch.response_mask, batch.advantage_mask), ret
    return adv * batch.advantage_mask, ret


def close(actual: torch.Tensor, expected: torch.Tensor, tol: float = 1e-6) -> None:
    torch.testing.assert_close(actual, expected.to(actual.dtype), rtol=tol, atol=tol)


# ------------------------------------------------------------------------- registry + the SDK
def test_every_builtin_is_registered_lazily_with_a_description():
    registry = vista_rl.host().registry("estimators")
    for estimator_id in ALL_IDS:
        spec = vista_rl.host().spec("estimators", estimator_id)
        assert spec.target == f"vista_rl.algorithms.estimators:{BUILTIN_ESTIMATORS[estimator_id][0]}"
        assert spec.description and spec.plugin == "vista.estimators"
    assert set(ALL_IDS) <= {spec.id for spec in registry}


@pytest.mark.parametrize("estimator_id", ALL_IDS)
def test_sdk_conformance(estimator_id):
    check_estimator(vista_rl.make_estimator(estimator_id))


@pytest.mark.parametrize(("estimator_id", "params"), [
    ("grpo", {"norm_by_std": False}), ("gae", {"gamma": 0.9, "lam": 0.8}),
    ("bilevel_gae", {"gamma": 0.99, "lam": 0.95, "turn_gamma": 0.9, "turn_lam": 0.9, "whiten": False}),
    ("turnwise_gae", {"turn_gamma": 1.0, "whiten": False}), ("reinforce_plus_plus", {"gamma": 0.5}),
])
def test_sdk_conformance_with_params(estimator_id, params):
    check_estimator(vista_rl.make_estimator(estimator_id, **params))


# ------------------------------------------------------------------------- hand-computed cases
def tiny(rewards, mask, values=None, ends=None, groups=None, advantage_mask=None) -> AdvantageBatch:
    def t(x):
        return None if x is None else torch.tensor([x] if not isinstance(x[0], list) else x, dtype=torch.float64)
    return AdvantageBatch(token_rewards=t(rewards), response_mask=t(mask), values=t(values), turn_ends=t(ends),
                          advantage_mask=t(advantage_mask),
                          group_ids=None if groups is None else torch.tensor(groups))


def test_masked_gae_skips_observation_tokens_by_hand():
    # tokens: a a o o a ; the reward 5 on an observation token is ignored (as VAGEN and verl do)
    batch = tiny([0, 0, 5, 0, 1], [1, 1, 0, 0, 1], values=[0.5, 0.2, 9, 9, 0.4])
    out = est.masked_gae(batch, gamma=0.9, lam=0.5, whiten=False)
    close(out.advantages, torch.tensor([[-0.1265, 0.43, 0, 0, 0.6]]))
    close(out.returns, torch.tensor([[0.3735, 0.63, 0, 0, 1.0]]))


def test_plain_gae_steps_through_observation_tokens_by_hand():
    batch = tiny([0, 0, 5, 0, 1], [1, 1, 0, 0, 1], values=[0.5, 0.2, 9, 9, 0.4])
    out = est.gae(batch, gamma=0.9, lam=0.5, whiten=False)
    close(out.advantages, torch.tensor([[3.30253375, 8.050075, 0, 0, 0.6]]))


def test_bilevel_and_turnwise_by_hand():
    # o a a | o a a ; turn rewards 1 and 2 at the turn ends; turn_gamma 0.5
    batch = tiny([0, 0, 1, 0, 0, 2], [0, 1, 1, 0, 1, 1], values=[0, 0.5, 0.4, 0, 0.3, 0.6],
                 ends=[0, 0, 1, 0, 0, 1])
    out = est.bilevel_gae(batch, gamma=1.0, lam=1.0, turn_gamma=0.5, turn_lam=1.0, whiten=False)
    close(out.advantages, torch.tensor([[0, 1.5, 1.6, 0, 1.7, 1.4]]))
    close(out.returns, torch.tensor([[0, 2.0, 2.0, 0, 2.0, 2.0]]))
    out = est.turnwise_gae(batch, turn_gamma=0.5, whiten=False)
    close(out.advantages, torch.tensor([[0, 1.6, 1.6, 0, 1.4, 1.4]]))
    close(out.returns, torch.tensor([[0, 2.0, 2.0, 0, 2.0, 2.0]]))
    # without turn_ends each run of assistant tokens is a turn: the same answer
    batch.turn_ends = None
    close(est.bilevel_gae(batch, turn_gamma=0.5, whiten=False).advantages, torch.tensor([[0, 1.5, 1.6, 0, 1.7, 1.4]]))


def test_group_estimators_by_hand():
    batch = tiny([[1, 0], [0, 3], [2, 0]], [[1, 1], [1, 1], [1, 0]], groups=[7, 7, 9])
    std = math.sqrt(2.0)
    close(est.grpo(batch).advantages, torch.tensor([[-1 / (std + 1e-6)] * 2, [1 / (std + 1e-6)] * 2,
                                                    [2 / (1 + 1e-6), 0]]))
    close(est.dr_grpo(batch).advantages, torch.tensor([[-1.0, -1.0], [1.0, 1.0], [2.0, 0.0]]))
    close(est.rloo(batch).advantages, torch.tensor([[-2.0, -2.0], [2.0, 2.0], [2.0, 0.0]]))
    raw = est.reinforce_plus_plus_baseline(batch, whiten=False).advantages
    close(raw, torch.tensor([[-1.0, -1.0], [1.0, 1.0], [2.0, 0.0]]))
    whitened = est.reinforce_plus_plus_baseline(batch).advantages
    picked = whitened[batch.response_mask.bool()]
    assert abs(picked.mean().item()) < 1e-9 and abs(picked.std().item() - 1) < 1e-6
    # uid strings (as verl passes them) group the same way as integers
    batch.group_ids = ["a", "a", "b"]  # type: ignore[assignment]
    close(est.rloo(batch).advantages, torch.tensor([[-2.0, -2.0], [2.0, 2.0], [2.0, 0.0]]))


def test_reinforce_plus_plus_by_hand():
    batch = tiny([0, 1, 5, 2], [1, 1, 0, 1])
    out = est.reinforce_plus_plus(batch, gamma=0.5, whiten=False)
    close(out.advantages, torch.tensor([[1.0, 2.0, 0.0, 2.0]]))


# ------------------------------------------------------------------- against loop references
TURN_CASES = [
    *[("bilevel_gae", dict(gamma=g, lam=lam, turn_gamma=tg, turn_lam=tl))
      for g, lam, tg, tl in [(1.0, 1.0, 0.95, 1.0), (0.99, 0.9, 0.8, 0.7), (0.5, 0.3, 1.0, 0.0)]],
    *[("turnwise_gae", dict(turn_gamma=tg, turn_lam=tl)) for tg, tl in [(0.95, 1.0), (0.7, 0.5), (1.0, 1.0)]],
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("split_masks", [False, True])
@pytest.mark.parametrize(("estimator_id", "params"), TURN_CASES)
def test_turn_estimators_match_loop_reference(seed, split_masks, estimator_id, params):
    batch = random_batch(seed=seed, split_masks=split_masks)
    reference = ref_bilevel if estimator_id == "bilevel_gae" else ref_turnwise
    adv, ret = reference(batch, **params)
    out = getattr(est, estimator_id)(batch, **params)
    close(out.advantages, adv)
    close(out.returns, ret)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("split_masks", [False, True])
def test_masked_and_plain_gae_match_loop_reference(seed, split_masks):
    batch = random_batch(seed=seed, split_masks=split_masks)
    for gamma, lam in [(1.0, 1.0), (0.99, 0.95), (0.6, 0.2), (1.0, 0.0)]:
        for masked, fn in [(True, est.masked_gae), (False, est.gae)]:
            adv, ret = ref_gae(batch, gamma, lam, masked=masked)
            out = fn(batch, gamma=gamma, lam=lam)
            close(out.advantages, adv)
            steps = batch.advantage_mask if masked else ret != 0
            close(out.returns * steps, ret * steps)


@pytest.mark.parametrize("split_masks", [False, True])
def test_reinforce_plus_plus_family_matches_loop_reference(split_masks):
    batch = random_batch(seed=6, split_masks=split_masks)
    rows, tokens = batch.token_rewards.shape
    # baseline: group-centred total reward on every advantage-mask token, whitened over the loss mask
    scores = [sum(batch.token_rewards[b].tolist()) for b in range(rows)]
    groups = batch.group_ids.tolist()
    centred = []
    for b in range(rows):
        mates = [scores[o] for o in range(rows) if groups[o] == groups[b]]
        centred.append(scores[b] - (sum(mates) / len(mates) if len(mates) > 1 else 0.0))
    tiled = torch.tensor(centred, dtype=torch.float64).unsqueeze(1) * batch.advantage_mask
    close(est.reinforce_plus_plus_baseline(batch).advantages,
          ref_whiten(tiled, batch.response_mask, batch.advantage_mask))
    # REINFORCE++: discounted reward-to-go over advantage-mask tokens = masked GAE with V = 0, lam = 1
    zero_values = AdvantageBatch(**{**batch.__dict__, "values": torch.zeros(rows, tokens, dtype=torch.float64)})
    expected, _ = ref_gae(zero_values, 0.8, 1.0, masked=True)
    close(est.reinforce_plus_plus(batch, gamma=0.8).advantages, expected)


def test_long_rows_with_a_small_discount_use_several_blocks():
    # gamma * lam = 0.05 -> blocks of ~190 tokens: the carry between blocks must be exact
    assert block_length(0.05, 900) < 900
    batch = random_batch(rows=4, tokens=900, max_turns=60, seed=5, split_masks=True)
    adv, _ = ref_gae(batch, 0.5, 0.1, masked=True)
    close(est.masked_gae(batch, gamma=0.5, lam=0.1).advantages, adv)
    adv, _ = ref_bilevel(batch, 0.5, 0.1, 0.9, 0.9)
    close(est.bilevel_gae(batch, gamma=0.5, lam=0.1, turn_gamma=0.9, turn_lam=0.9).advantages, adv)


def test_scan_with_resets_matches_a_loop():
    gen = torch.Generator().manual_seed(3)
    delta = torch.randn(5, 700, generator=gen, dtype=torch.float64)
    steps = torch.rand(5, 700, generator=gen) < 0.6
    resets = steps & (torch.rand(5, 700, generator=gen) < 0.05)
    for coef in [0.0, 0.02, 0.5, 0.97, 1.0]:
        expected = torch.zeros_like(delta)
        for b in range(5):
            acc = 0.0
            for t in reversed(range(700)):
                if steps[b, t]:
                    acc = delta[b, t].item() + (0.0 if resets[b, t] else coef * acc)
                    expected[b, t] = acc
        close(reverse_linear_scan(delta, steps, coef, resets), expected, tol=1e-9)


def test_float32_in_float32_out_and_close_to_float64():
    batch64 = random_batch(seed=4)
    batch32 = random_batch(seed=4)
    batch32.token_rewards, batch32.values = batch32.token_rewards.float(), batch32.values.float()
    for estimator_id in ALL_IDS:
        fn = vista_rl.make_estimator(estimator_id)
        out32, out64 = fn(batch32), fn(batch64)
        assert out32.advantages.dtype == torch.float32 and out32.returns.dtype == torch.float32
        close(out32.advantages, out64.advantages, tol=1e-4)


# ------------------------------------------------------------------------------- bad input
def test_missing_inputs_and_bad_params_are_clear_errors():
    batch = random_batch(seed=0)
    batch.values = None
    with pytest.raises(ValueError, match="needs batch.values"):
        est.bilevel_gae(batch)
    batch = random_batch(seed=0)
    batch.group_ids = None
    with pytest.raises(ValueError, match="needs batch.group_ids"):
        est.grpo(batch)
    with pytest.raises(ValueError, match="turn_gamma must lie in"):
        est.bilevel_gae(random_batch(), turn_gamma=1.5)
    bad = random_batch()
    bad.values = bad.values[:, :-1]
    with pytest.raises(ValueError, match="values has shape"):
        est.masked_gae(bad)


def test_rows_without_turns_or_tokens_are_zero():
    batch = random_batch(rows=4, seed=2)
    for name in ("response_mask", "advantage_mask", "turn_ends"):
        getattr(batch, name)[1] = 0
    for estimator_id in ("gae", "masked_gae", "bilevel_gae", "turnwise_gae", "reinforce_plus_plus"):
        out = vista_rl.make_estimator(estimator_id)(batch)
        assert torch.isfinite(out.advantages).all()
        assert out.advantages[1].abs().max() == 0
