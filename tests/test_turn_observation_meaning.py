"""One meaning for ``Turn.observation``: the observation the response *answered*.

The rollout engine, the expert (oracle) trajectories of ``vista_plugin_gamekit.expert`` and the SFT data
built from either (in memory or through the trajectory store) must agree, or SFT pairs each response
with the wrong observation (off by one turn).  The counter env's observations differ every step
("Counter at 0", "Counter at 1", ...), with a different image each time, so an off-by-one shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vista_plugin_gamekit.expert import expert_trajectory, generate_expert_trajectories

import vista_rl
from tests.rollout_testkit import RolloutTestPlugin
from vista_rl.config import RolloutSection
from vista_rl.rollout import RolloutEngine, episode_specs
from vista_rl.store.images import image_hash
from vista_rl.store.layout import TRAJECTORIES_FILE
from vista_rl.store.writer import RunWriter

ENV_ID = "test/counter-v0"


@pytest.fixture
def counter(vista_plugin: Any) -> None:
    vista_plugin(RolloutTestPlugin())


def _rollout(seed: int) -> vista_rl.Trajectory:
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle"), RolloutSection(max_turns=10)) as engine:
        (trajectory,) = engine.run(episode_specs(ENV_ID, [seed], 1, {"target": 3}))
    return trajectory


def test_rollout_and_expert_store_the_observation_answered(counter: None) -> None:
    rollout = _rollout(4)
    expert = expert_trajectory(vista_rl.make_env(ENV_ID, target=3), seed=4, env_id=ENV_ID)
    assert rollout.success and expert.success and len(rollout.turns) == len(expert.turns) == 3
    assert [turn.observation for turn in expert.turns] == ["<image>\nCounter at 0.", "<image>\nCounter at 1.",
                                                           "<image>\nCounter at 2."]
    for ours, theirs in zip(rollout.turns, expert.turns, strict=True):
        assert ours.observation == theirs.observation and ours.response == theirs.response
        assert [image_hash(i) for i in ours.images] == [image_hash(i) for i in theirs.images]
        assert ours.reward == theirs.reward
    assert expert.turns[0].observation == expert.initial_observation
    assert [image_hash(i) for i in expert.turns[0].images] == [image_hash(i) for i in expert.initial_images]
    # The observation after the last step is kept apart, the same way by both.
    assert expert.metadata["final_observation"] == rollout.metadata["final_observation"] == "<image>\nCounter at 3."
    (generated,) = generate_expert_trajectories(ENV_ID, [4], target=3)
    assert [turn.observation for turn in generated.turns] == [turn.observation for turn in expert.turns]


def test_sft_data_pairs_each_response_with_the_observation_it_answered(
        counter: None, tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from transformers import AutoProcessor
    from vista_plugin_local.chat_tokens import ChatEncoder
    from vista_plugin_local.sft_data import load_jsonl, tokens_from_trajectory

    encoder = ChatEncoder(AutoProcessor.from_pretrained(tiny_model_dir))
    rollout = _rollout(2)
    expert = expert_trajectory(vista_rl.make_env(ENV_ID, target=3), seed=2, env_id=ENV_ID)
    from_rollout = tokens_from_trajectory(rollout, encoder)
    from_expert = tokens_from_trajectory(expert, encoder)
    with RunWriter(tmp_path / "stored", html=False) as writer:
        writer.write(expert)
    (from_store,), report = load_jsonl(tmp_path / "stored" / TRAJECTORIES_FILE, encoder)
    assert report.rows == 1 and not report.skipped
    for tokens in (from_expert, from_store):
        assert tokens.input_ids == from_rollout.input_ids and tokens.loss_mask == from_rollout.loss_mask
        assert [im.pixel_values.sum().item() for im in tokens.images] == \
            [im.pixel_values.sum().item() for im in from_rollout.images]
    # Read the sequence back: the text just before response k is observation k.
    ids, mask = from_expert.input_ids, from_expert.loss_mask
    starts = [i for i in range(len(mask)) if mask[i] and (i == 0 or not mask[i - 1])]
    for k, start in enumerate(starts):
        context = encoder.tokenizer.decode(ids[:start], skip_special_tokens=False)
        last_user = context.rsplit("<|im_start|>user\n", 1)[1]
        assert f"Counter at {k}." in last_user and f"Counter at {k + 1}." not in last_user
    stored = json.loads((tmp_path / "stored" / TRAJECTORIES_FILE).read_text().splitlines()[0])
    assert stored["turns"][0]["observation"] == stored["initial_observation"]
