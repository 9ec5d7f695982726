"""Per-row advantages: the local engine's estimators and verl's, through our bridge, on one batch.

One scripted batch of episodes (3 seeds x 4 samples, 1 to 4 turns each, per-turn rewards, a failed
episode) is trained two ways:

- the local engine's code (``vista_plugin_local.advantages``, imported from ``plugins/engines/local``; the
  verl venv cannot install that plugin, whose transformers pin conflicts with verl's): the episodes'
  per-turn samples (``per_turn_advantages``) or whole-episode samples (``build_advantage_batch``),
  the failed episode left out as ``training_samples`` leaves it out;
- verl 0.9.1's v1 trainer path: the rows keyed ``{uid}_{session}_{turn}`` as its agent-loop worker
  stores them, through ``trainer_base.compute_advantage_for_multi_trajectories`` (the function its
  ``_compute_advantage`` calls) after ``install_bridge``, with each row's ``extra_fields`` as the
  agent loop writes them (``vista_turn``, ``vista_turn_reward``, ``vista_state``, ``turn_scores``,
  ``turn_ends``, ``vista_failure``) standing in for TransferQueue, which does not run here.

The advantages of every trained token must agree: GRPO and RLOO on per-turn rows (turn credit
episode, turn and state), GAE on per-turn rows and on whole-episode rows with scripted critic values.
GAE on per-turn rows is also checked against an independent reference: the local engine's
whole-episode batch of the same episodes through ``masked_gae`` (the per-turn rule,
``vista_rl.algorithms.turn_credit.turn_token_advantages``, is the episode's replies as one sequence).
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("verl.trainer.ppo.core_algos")
pytest.importorskip("transfer_queue")  # verl's v1 trainer module imports it

from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from vista_plugin_verl import estimators  # noqa: E402
from vista_plugin_verl.agent_loop import TurnRow, turn_state_key  # noqa: E402

import vista_rl  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: the local engine's plugin and the vista plugins it imports (its pyproject's dependencies)
LOCAL_PLUGIN_FOLDERS = ("engines/local", "kits/decodekit")
SEEDS, SAMPLES = 3, 4
FAILED = ("uid1", 2)  # (seed uid, session) of the episode whose env crashed


@dataclass
class Episode:
    uid: str
    session: int
    rewards: list[float]
    prompts: list[list[int]]
    replies: list[list[int]]
    failed: bool = False
    values: list[list[float]] = field(default_factory=list)


def scripted_batch(seed: int = 0) -> list[Episode]:
    """Episodes of 1-4 turns; every first turn of a seed shares its prompt (the same reset), and some
    replies repeat, so ``turn_credit: state`` has states and actions seen more than once."""
    rng = random.Random(seed)
    episodes = []
    for group in range(SEEDS):
        start = [100 + group, 7, 8, 9]
        for session in range(SAMPLES):
            turns = 1 + (session + group) % 4
            prompts, replies, rewards = [], [], []
            for turn in range(turns):
                prompts.append(start if turn == 0 else [200 + group, turn, rng.randint(0, 1)])
                replies.append([rng.choice([11, 12]), rng.randint(20, 22), 2][: 2 + rng.randint(0, 1)])
                rewards.append(round(rng.uniform(-0.5, 1.0), 3) if rng.random() < 0.7 else 0.0)
            episodes.append(Episode(f"uid{group}", session, rewards, prompts, replies,
                                    failed=(f"uid{group}", session) == FAILED))
    return episodes


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The local engine's advantage code, imported from its plugin folder."""
    folders = [str(ROOT / "plugins" / name) for name in LOCAL_PLUGIN_FOLDERS]
    sys.path[:0] = folders
    try:
        from vista_plugin_local import advantages
        from vista_plugin_local.chat_tokens import EpisodeTokens
        from vista_plugin_local.samples import TrainSample
    finally:
        for folder in folders:
            sys.path.remove(folder)
    return SimpleNamespace(advantages=advantages, EpisodeTokens=EpisodeTokens, TrainSample=TrainSample)


@pytest.fixture(scope="module")
def multi() -> Any:
    """verl's v1 ``compute_advantage_for_multi_trajectories`` as its trainer looks it up, bridged."""
    from verl.trainer.ppo.v1 import trainer_base

    estimators.register_in_verl()
    estimators.install_bridge()
    assert getattr(trainer_base.compute_advantage_for_multi_trajectories, "__vista_bridge__", False)
    return trainer_base.compute_advantage_for_multi_trajectories


# ------------------------------------------------------------------------- the local side
def local_per_turn(local: SimpleNamespace, episodes: list[Episode], estimator: str, credit: str) -> dict[Any, float]:
    samples = []
    groups: dict[str, int] = {}
    for episode in episodes:
        if episode.failed:  # training_samples: "episode failed: ..." -> left out of the update
            continue
        trajectory = SimpleNamespace()  # per_turn_advantages tells episodes apart by identity
        group = groups.setdefault(episode.uid, len(groups))
        for turn, (prompt, reply, reward) in enumerate(zip(episode.prompts, episode.replies, episode.rewards,
                                                          strict=True)):
            tokens = local.EpisodeTokens(prompt + reply, [0] * len(prompt) + [1] * len(reply),
                                         [len(prompt) + len(reply) - 1], [])
            samples.append(local.TrainSample(trajectory, tokens, group, [reward], turn))
    width = max(len(sample.tokens) for sample in samples)
    made = local.advantages.make_estimator(estimator, {})
    table = local.advantages.per_turn_advantages(made, samples, width, credit)
    keys = [(e.uid, e.session, t) for e in episodes if not e.failed for t in range(len(e.prompts))]
    firsts = [sample.tokens.loss_mask.index(1) for sample in samples]
    return {key: float(table[row, first]) for row, (key, first) in enumerate(zip(keys, firsts, strict=True))}


# -------------------------------------------------------------------------- the verl side
def verl_rows(episodes: list[Episode]) -> tuple[list[str], list[dict[str, Any]], DataProto]:
    """The rows as verl's v1 worker stores them: key, extra_fields and the padded response mask."""
    keys, extras, masks = [], [], []
    for episode in episodes:
        for turn, (prompt, reply, reward) in enumerate(zip(episode.prompts, episode.replies, episode.rewards,
                                                          strict=True)):
            keys.append(f"{episode.uid}_{episode.session}_{turn}")
            row = TurnRow(prompt, [], reply, None)
            extras.append({"vista_turn": turn, "vista_turn_reward": reward, "vista_turns": len(episode.prompts),
                           "vista_failure": "env.step() raised" if episode.failed else None,
                           "vista_state": turn_state_key(row), "vista_action": str(reply)})
            masks.append([0 if episode.failed else 1] * len(reply))
    return keys, extras, _data(keys, masks)


def _data(keys: list[str], masks: list[list[int]], values: torch.Tensor | None = None) -> DataProto:
    width = max(len(mask) for mask in masks)
    response_mask = torch.zeros((len(keys), width))
    for row, mask in enumerate(masks):
        response_mask[row, :len(mask)] = torch.tensor(mask, dtype=torch.float32)
    tensors = {"response_mask": response_mask, "token_level_rewards": torch.zeros_like(response_mask)}
    if values is not None:
        tensors["values"] = values
    uids = np.array([key.rsplit("_", 2)[0] for key in keys], dtype=object)
    return DataProto(batch=TensorDict(tensors, batch_size=len(keys)), non_tensor_batch={"uid": uids})


def through_verl(multi: Any, monkeypatch: pytest.MonkeyPatch, keys: list[str], extras: list[dict[str, Any]],
                 data: DataProto, estimator: str, credit: str = "episode") -> torch.Tensor:
    lookup = dict(zip(keys, extras, strict=True))
    monkeypatch.setattr(estimators, "fetch_extra_fields", lambda batch_keys: [lookup[key] for key in batch_keys])
    config = {"vista_turn_credit": credit, "norm_adv_by_std_in_grpo": True}
    out = multi(data, batch_keys=keys, adv_estimator=f"vista_{estimator}", gamma=1.0, lam=1.0, num_repeat=SAMPLES,
                norm_adv_by_std_in_grpo=True, config=config)
    return out.batch["advantages"]


# ------------------------------------------------------------------------------- the tests
@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
@pytest.mark.parametrize("credit", ["episode", "turn", "state"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_turn_rows_get_the_local_engines_advantages(local, multi, monkeypatch, estimator: str, credit: str,
                                                        seed: int) -> None:
    episodes = scripted_batch(seed)
    expected = local_per_turn(local, episodes, estimator, credit)
    keys, extras, data = verl_rows(episodes)
    # verl hands the rows in its own order (TransferQueue's): shuffled here, so nothing rests on order
    order = list(range(len(keys)))
    random.Random(seed).shuffle(order)
    keys, extras = [keys[i] for i in order], [extras[i] for i in order]
    data = data.select_idxs(order)
    advantages = through_verl(multi, monkeypatch, keys, extras, data, estimator, credit)
    mask = data.batch["response_mask"]
    for row, key in enumerate(keys):
        uid, session, turn = key.rsplit("_", 2)
        trained = mask[row].bool()
        if (uid, int(session)) == FAILED:
            assert not trained.any() and advantages[row].abs().max() == 0
            continue
        want = expected[(uid, int(session), int(turn))]
        torch.testing.assert_close(advantages[row][trained], torch.full((int(trained.sum()),), want),
                                   rtol=1e-5, atol=1e-6)
        assert advantages[row][~trained].abs().sum() == 0
    assert any(abs(value) > 1e-3 for value in expected.values())  # the batch is not degenerate


def test_long_episodes_do_not_outweigh_short_ones(multi, monkeypatch) -> None:
    """GRPO on per-turn rows with credit episode: an episode's advantages sum to its GRPO advantage
    whatever its length (verl's own rule would give every row the whole advantage)."""
    episodes = scripted_batch(0)
    keys, extras, data = verl_rows(episodes)
    advantages = through_verl(multi, monkeypatch, keys, extras, data, "grpo")
    first = {}
    for row, key in enumerate(keys):
        episode = key.rsplit("_", 1)[0]
        first.setdefault(episode, []).append(float(advantages[row][data.batch["response_mask"][row].bool()][0])
                                             if data.batch["response_mask"][row].any() else 0.0)
    per_episode = {episode: sum(values) for episode, values in first.items()}
    uid0 = [value for episode, value in per_episode.items() if episode.startswith("uid0_")]
    assert abs(sum(uid0)) < 1e-5 and max(abs(v) for v in uid0) > 0.1  # GRPO: zero-sum within the group


def test_gae_on_whole_episode_rows_matches_the_local_engine(local, multi, monkeypatch) -> None:
    """One row per episode (rollout.sequences: episode) with critic values: our GAE through the v1 bridge
    (turn rewards rebuilt from turn_scores at turn_ends) equals the local engine's batch."""
    episodes = scripted_batch(3)
    generator = torch.Generator().manual_seed(3)
    keys, extras, masks, samples, layouts = [], [], [], [], []
    groups: dict[str, int] = {}
    for episode in episodes:
        ids, mask, ends = [], [], []
        for turn, (prompt, reply) in enumerate(zip(episode.prompts, episode.replies, strict=True)):
            if turn:
                ids += prompt
                mask += [0] * len(prompt)
            ids += reply
            mask += [1] * len(reply)
            ends.append(len(mask) - 1)
        keys.append(f"{episode.uid}_{episode.session}_0")
        extras.append({"turn_scores": list(episode.rewards), "turn_ends": ends,
                       "vista_failure": "crashed" if episode.failed else None})
        masks.append([0] * len(mask) if episode.failed else mask)
        layouts.append((episode.prompts[0], ids, mask, ends))
    width = max(len(m) for m in masks)
    values = torch.randn((len(keys), width), generator=generator)
    data = _data(keys, masks, values.clone())
    verl_adv = through_verl(multi, monkeypatch, keys, extras, data, "gae")

    for index, episode in enumerate(episodes):
        prompt, ids, mask, ends = layouts[index]
        if episode.failed:
            continue
        tokens = local.EpisodeTokens(prompt + ids, [0] * len(prompt) + mask, [len(prompt) + e for e in ends], [])
        samples.append((index, local.TrainSample(SimpleNamespace(), tokens, groups.setdefault(episode.uid, len(groups)),
                                                 list(episode.rewards), None)))
    local_width = max(len(sample.tokens) for _, sample in samples)
    local_values = torch.zeros((len(samples), local_width))
    for row, (index, _sample) in enumerate(samples):
        start = len(layouts[index][0])
        local_values[row, start:start + width] = values[index, : local_width - start]
    batch = local.advantages.build_advantage_batch([s for _, s in samples], local_width, local_values)
    made = local.advantages.make_estimator("gae", {})
    local_adv = local.advantages.compute_advantages(made, batch).advantages
    for row, (index, _sample) in enumerate(samples):
        start, length = len(layouts[index][0]), len(layouts[index][2])
        torch.testing.assert_close(verl_adv[index, :length], local_adv[row, start:start + length], rtol=1e-5, atol=1e-5)
    failed = [i for i, e in enumerate(episodes) if e.failed]
    assert failed and all(verl_adv[i].abs().max() == 0 for i in failed)


def local_turn_samples(local: SimpleNamespace, episodes: list[Episode]) -> tuple[list[Any], list[tuple[int, int]]]:
    """The local engine's per-turn samples of the episodes that did not fail, with (episode, turn) of each."""
    samples, where, groups = [], [], {}
    for number, episode in enumerate(episodes):
        if episode.failed:
            continue
        trajectory = SimpleNamespace()
        for turn, (prompt, reply, reward) in enumerate(zip(episode.prompts, episode.replies, episode.rewards,
                                                          strict=True)):
            tokens = local.EpisodeTokens(prompt + reply, [0] * len(prompt) + [1] * len(reply),
                                         [len(prompt) + len(reply) - 1], [])
            samples.append(local.TrainSample(trajectory, tokens, groups.setdefault(episode.uid, len(groups)),
                                             [reward], turn))
            where.append((number, turn))
    return samples, where


def whole_episode_reference(local: SimpleNamespace, episodes: list[Episode]) -> dict[tuple[int, int], torch.Tensor]:
    """One sequence per episode (observations untrained), the critic's values on its replies, through the
    local engine's batch and ``masked_gae``: each turn's reply advantages, by (episode, turn)."""
    samples, layouts, groups = [], [], {}
    for number, episode in enumerate(episodes):
        if episode.failed:
            continue
        ids, mask, ends, values, spans = [], [], [], [], []
        for turn, (prompt, reply) in enumerate(zip(episode.prompts, episode.replies, strict=True)):
            ids += prompt
            mask += [0] * len(prompt)
            values += [0.0] * len(prompt)
            spans.append((turn, len(ids), len(reply)))
            ids += reply
            mask += [1] * len(reply)
            values += episode.values[turn]
            ends.append(len(mask) - 1)
        samples.append(local.TrainSample(SimpleNamespace(), local.EpisodeTokens(ids, mask, ends, []),
                                         groups.setdefault(episode.uid, len(groups)), list(episode.rewards), None))
        layouts.append((number, values, spans))
    width = max(len(sample.tokens) for sample in samples)
    values = torch.zeros((len(samples), width))
    for row, (_number, row_values, _spans) in enumerate(layouts):
        values[row, :len(row_values)] = torch.tensor(row_values)
    batch = local.advantages.build_advantage_batch(samples, width, values)
    table = local.advantages.compute_advantages(local.advantages.make_estimator("masked_gae", {}), batch).advantages
    return {(number, turn): table[row, start:start + length]
            for row, (number, _values, spans) in enumerate(layouts) for turn, start, length in spans}


@pytest.mark.parametrize("estimator", ["gae", "masked_gae"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gae_on_per_turn_rows_matches_the_local_engine(local, multi, monkeypatch, estimator: str, seed: int) -> None:
    """Per-turn rows with a scripted critic (a value per reply token; noise where no token is trained, which
    must not matter): verl's rows through the v1 bridge, in TransferQueue's shuffled order, get the local
    engine's per-turn advantages, and both equal the whole-episode sequence's ``masked_gae``."""
    episodes = scripted_batch(seed)
    generator = torch.Generator().manual_seed(seed)
    for episode in episodes:
        episode.values = [torch.randn(len(reply), generator=generator).tolist() for reply in episode.replies]
    samples, where = local_turn_samples(local, episodes)
    width = max(len(sample.tokens) for sample in samples)
    local_values = torch.randn((len(samples), width), generator=generator) * 10
    for row, (number, turn) in enumerate(where):
        start = len(episodes[number].prompts[turn])
        reply_values = episodes[number].values[turn]
        local_values[row, start:start + len(reply_values)] = torch.tensor(reply_values)
    made = local.advantages.make_estimator(estimator, {})
    local_table = local.advantages.per_turn_advantages(made, samples, width, values=local_values)
    expected = {(number, turn): local_table[row, len(episodes[number].prompts[turn]):][:len(episodes[number].replies[turn])]
                for row, (number, turn) in enumerate(where)}
    reference = whole_episode_reference(local, episodes)

    keys, extras, data = verl_rows(episodes)
    response_values = torch.randn(data.batch["response_mask"].shape, generator=generator) * 10
    row = 0
    for episode in episodes:
        for turn_values in episode.values:
            response_values[row, :len(turn_values)] = torch.tensor(turn_values)
            row += 1
    data.batch["values"] = response_values
    order = list(range(len(keys)))
    random.Random(seed).shuffle(order)
    keys, extras = [keys[i] for i in order], [extras[i] for i in order]
    data = data.select_idxs(order)
    advantages = through_verl(multi, monkeypatch, keys, extras, data, estimator)
    mask = data.batch["response_mask"]
    number_of = {(episode.uid, episode.session): number for number, episode in enumerate(episodes)}
    for row, key in enumerate(keys):
        uid, session, turn = key.rsplit("_", 2)
        trained = mask[row].bool()
        if (uid, int(session)) == FAILED:
            assert not trained.any() and advantages[row].abs().max() == 0
            continue
        place = (number_of[(uid, int(session))], int(turn))
        torch.testing.assert_close(advantages[row][trained], expected[place], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(expected[place], reference[place], rtol=1e-5, atol=1e-5)
        assert advantages[row][~trained].abs().sum() == 0
    assert max(float(value.abs().max()) for value in expected.values()) > 0.1  # not degenerate


def test_a_critic_with_per_turn_rows_trains_as_locally() -> None:
    """GAE with per-turn rows is trained (the critic on, the bridge's token-level credit); what the run
    config refuses for both engines (turn_credit beside a critic, a critic GRPO would not use) is
    refused here too, naming the key."""
    from vista_plugin_verl.config import check_neutral, compose_overrides, engine_config

    from vista_rl import ConfigError
    from vista_rl.config import RunConfig, apply_overrides

    base = {"engine": "verl", "env": {"id": "oddshape/odd-colour-v0"}, "model": {"path": "m"},
            "rollout": {"window_size": 0, "group_size": 4}, "algorithm": {"estimator": "gae"},
            "trainer": {"seeds_per_step": 8, "micro_batch_size": 2},
            "engine_config": {"verl": {"cluster": {"n_gpus_per_node": 4}}}}
    run = RunConfig.model_validate(base)
    assert check_neutral(run) == []
    overrides = compose_overrides(run, engine_config(run), "t.parquet", "v.parquet")
    assert "critic.enable=true" in overrides and "algorithm.adv_estimator=vista_gae" in overrides
    for refused, key in ((["algorithm.turn_credit=state"], "algorithm.turn_credit"),
                         (["algorithm.estimator=grpo", "algorithm.critic=true"], "algorithm.critic")):
        with pytest.raises(ValueError, match=rf"{key}: "):
            RunConfig.model_validate(apply_overrides(base, refused))
    with pytest.raises(ConfigError):
        check_neutral(RunConfig.model_validate(apply_overrides(base, ["algorithm.estimator=no_such"])))
    assert vista_rl.host().spec("estimators", "gae")
