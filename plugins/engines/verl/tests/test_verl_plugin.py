"""The verl plugin against verl's real classes (run in .venvs/verl: ``bash scripts/test.d/verl.sh``).

Skipped where verl is not importable (the main environment).  The agent loop runs end to end:
instantiated through verl's agent-loop registry with Hydra, as verl's worker does, generating with
a real tiny Qwen2.5-VL model behind verl's ``generate`` interface (``TransformersTokenServer``).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

verl = pytest.importorskip("verl")
pytest.importorskip("torchvision")

import hydra  # noqa: E402
import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from PIL import Image  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry  # noqa: E402
from verl.trainer.ppo import core_algos, ray_trainer  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from vista_plugin_verl.agent_loop import reply_text  # noqa: E402
from vista_plugin_verl.config import compose_overrides, compose_verl_config, engine_config  # noqa: E402
from vista_plugin_verl.dataset import SeedOverlapError, write_env_datasets  # noqa: E402
from vista_plugin_verl.estimators import VERL_NAMES, turn_rewards_tensor  # noqa: E402
from vista_plugin_verl.reward import compute_score  # noqa: E402

import vista_rl  # noqa: E402
from vista_rl import (  # noqa: E402
    AdvantageBatch,  # noqa: E402
    ConfigError,  # noqa: E402
    Env,
    Observation,
    StepResult,
)
from vista_rl.config import RolloutSection, RunConfig  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
TEST_ENV = "verltest/palette-steps-v0"


class PaletteSteps(Env):
    """Three turns; every observation carries a seeded colour image; reward depends on the reply."""

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.rng = random.Random(seed)
        self.turn = 0
        return self._observe("Start"), {}

    def _observe(self, label: str) -> Observation:
        colour = tuple(self.rng.randrange(256) for _ in range(3))
        return Observation(f"{label} {self.turn}: <image> what colour?", [Image.new("RGB", (56, 56), colour)])

    def step(self, action: str) -> StepResult:
        self.turn += 1
        reward = 0.25 * self.turn + (0.5 if len(action) % 2 else 0.0)
        return StepResult(self._observe("Step"), reward, self.turn >= 3, False, {"success": self.turn >= 3})

    def system_prompt(self) -> str:
        return "Name the colour."


@pytest.fixture
def palette_env(vista_plugin) -> str:  # type: ignore[no-untyped-def]
    vista_plugin(SimpleNamespace(register_envs=vista_rl.hookimpl(lambda register: register(TEST_ENV, PaletteSteps))))
    return TEST_ENV


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any, str]:
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from vista_rl_sdk.tiny_models import cached_tiny_model

    path = cached_tiny_model()
    return AutoProcessor.from_pretrained(path), AutoModelForImageTextToText.from_pretrained(path), str(path)


def _run_loop(tiny: tuple[Any, Any, str], extra_info: dict[str, Any], response_length: int = 1024) -> Any:
    from vista_plugin_verl.testing import TransformersTokenServer

    processor, model, _ = tiny
    server = TransformersTokenServer(model, processor, max_new_tokens=10)
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {
        "prompt_length": 1024, "response_length": response_length, "multi_turn": {"max_assistant_turns": 5}}},
        "data": {}})

    async def main() -> Any:
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry["vista_agent"], trainer_config=DictConfigWrap(config),
            server_manager=server, tokenizer=processor.tokenizer, processor=processor, hf_model_type="qwen2_5_vl",
            dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))
        row = {"rollout": RolloutSection().model_dump_json(), **extra_info}  # rows carry the rollout section
        output = await loop.run({"temperature": 1.0, "top_p": 1.0, "seed": 7, "logprobs": True},
                                extra_info=row, raw_prompt=[])
        return loop, output

    loop, output = asyncio.run(main())
    return SimpleNamespace(loop=loop, output=output, server=server, processor=processor)


def _runs(mask: list[int], bit: int) -> list[tuple[int, int]]:
    runs, start = [], None
    for i, value in enumerate([*mask, 1 - bit]):
        if value == bit and start is None:
            start = i
        elif value != bit and start is not None:
            runs.append((start, i))
            start = None
    return runs


def test_agent_loop_multi_turn_images_matches_the_trajectory(tiny, palette_env) -> None:  # type: ignore[no-untyped-def]
    result = _run_loop(tiny, {"env_id": palette_env, "env_config": "{}", "seed": 5})
    out, server, tokenizer = result.output, result.server, result.processor.tokenizer
    response, mask = out.response_ids, out.response_mask
    assert len(response) == len(mask) == len(out.response_logprobs)
    # mask 1 exactly on what the model generated, turn by turn
    generated = [call["token_ids"] for call in server.calls]
    assert len(generated) == 3 and [call["num_images"] for call in server.calls] == [1, 2, 3]
    assistant_runs = _runs(mask, 1)
    assert len(assistant_runs) == 3
    for (start, end), ids in zip(assistant_runs, generated, strict=True):
        assert response[start:start + len(ids)] == ids and end - start >= len(ids)
    # observation tokens (mask 0) carry the env's text and one image span per image
    observations = [tokenizer.decode(response[s:e]) for s, e in _runs(mask, 0)]
    assert len(observations) == 2 and "Step 1" in observations[0] and "Step 2" in observations[1]
    image_pad = tokenizer.convert_tokens_to_ids("<|vision_start|>")
    assert (out.prompt_ids + response).count(image_pad) == len(out.multi_modal_data["images"]) == 3
    # images in placeholder order equal the env's observations; rewards equal a local replay
    env = PaletteSteps()
    first, _ = env.reset(seed=5)
    expected_images, rewards = [first.images[0]], []
    for ids in generated:
        step = env.step(reply_text(tokenizer, ids, result.loop.end_ids))
        rewards.append(step.reward)
        expected_images.append(step.observation.images[0])
    assert [im.tobytes() for im in out.multi_modal_data["images"]] == [im.tobytes() for im in expected_images[:3]]
    assert out.extra_fields["turn_scores"] == rewards and out.reward_score == pytest.approx(sum(rewards))
    assert out.extra_fields["turn_ends"] == [end - 1 for _, end in assistant_runs]
    assert out.extra_fields["vista_success"] is True
    # logprobs of generated tokens are the server's, 0 on observation tokens
    for (start, _), call_ids in zip(assistant_runs, generated, strict=True):
        assert all(isinstance(x, float) for x in out.response_logprobs[start:start + len(call_ids)])
    for start, end in _runs(mask, 0):
        assert all(x == 0.0 for x in out.response_logprobs[start:end])
    # the vista Trajectory's token view is the same sequence and masks
    view = result.loop.last_trajectory.token_view
    assert view.input_ids == out.prompt_ids + response
    assert view.loss_mask == [0] * len(out.prompt_ids) + mask
    assert view.turn_rewards == rewards
    # and verl's own conversion to tensors agrees
    tensors = out.as_dict()
    assert tensors["responses"].tolist() == response and tensors["response_mask"].tolist() == mask


def test_agent_loop_stops_before_overflowing_the_response(tiny, palette_env) -> None:  # type: ignore[no-untyped-def]
    result = _run_loop(tiny, {"env_id": palette_env, "seed": 1}, response_length=24)
    out = result.output
    assert len(out.response_ids) <= 24
    assert len(out.multi_modal_data["images"]) == out.prompt_ids.count(
        result.processor.tokenizer.convert_tokens_to_ids("<|vision_start|>")) + out.response_ids.count(
        result.processor.tokenizer.convert_tokens_to_ids("<|vision_start|>"))


def test_agent_loop_runs_a_registered_plugin_env(tiny) -> None:  # type: ignore[no-untyped-def]
    result = _run_loop(tiny, {"env_id": "oddshape/odd-colour-v0", "env_config": '{"cell_size": 20}', "seed": 3})
    out = result.output
    assert len(_runs(out.response_mask, 1)) == 1 and len(out.multi_modal_data["images"]) == 1
    assert out.extra_fields["turn_scores"] in ([0.0], [1.0])


class AlwaysWrong(Env):
    """Every reply is a wrong final answer; the third step raises (an env bug)."""

    steps = 0

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        return Observation("<image> Which colour?", [Image.new("RGB", (56, 56), (9, 99, 199))]), {}

    def step(self, action: str) -> StepResult:
        type(self).steps += 1
        if type(self).steps == 3:
            raise RuntimeError("env exploded")
        return StepResult(Observation("Wrong."), 0.0, True, False,
                          {"success": False, "reflection_feedback": "Not that colour."})


def test_agent_loop_reflects_and_records_an_env_crash_like_the_engine(tiny, vista_plugin) -> None:  # type: ignore[no-untyped-def]
    """The loop runs turns through vista_rl.rollout.EpisodeDriver: the run's reflection keys (from the
    dataset row) reset the env after a wrong answer, and a crashing step ends the episode with the
    same failure text RolloutEngine records."""
    vista_plugin(SimpleNamespace(register_envs=vista_rl.hookimpl(
        lambda register: register("verltest/always-wrong-v0", AlwaysWrong))))
    AlwaysWrong.steps = 0
    rollout = '{"reflection": true, "reflection_attempts": 3}'
    result = _run_loop(tiny, {"env_id": "verltest/always-wrong-v0", "seed": 2, "rollout": rollout})
    out, state = result.output, result.loop.last_trajectory
    assert len(state.turns) == 3 and out.extra_fields["vista_attempts"] == 3
    assert state.turns[1].observation.startswith("Not that colour. You have 2 attempts left.\nTry again")
    assert state.turns[2].observation.startswith("Not that colour. This is your last attempt.")
    assert out.extra_fields["vista_failure"] == "env.step() raised RuntimeError: env exploded"
    assert len(out.multi_modal_data["images"]) == 3  # each reset's image is in the context
    assert out.extra_fields["vista_success"] is False


def _random_verl_batch(seed: int = 0, rows: int = 8, tokens: int = 40) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(seed)
    mask = torch.zeros(rows, tokens)
    turn_scores, turn_ends = [], []
    for row in range(rows):
        scores, ends = [], []
        for turn, start in enumerate(range(0, tokens - 8, 12)):
            length = 3 + (row + turn) % 5
            mask[row, start + 4:start + 4 + length] = 1
            ends.append(start + 3 + length)
            scores.append(float(torch.randn(1, generator=gen)))
        turn_scores.append(scores)
        turn_ends.append(ends)
    rewards, end_flags = turn_rewards_tensor(turn_scores, turn_ends, (rows, tokens), torch.float64)
    return {"mask": mask.double(), "rewards": rewards, "ends": end_flags, "turn_scores": turn_scores,
            "turn_ends": turn_ends, "values": torch.randn(rows, tokens, generator=gen).double() * mask,
            "uids": np.array([f"u{row // 4}" for row in range(rows)], dtype=object)}


@pytest.mark.parametrize("name", sorted(VERL_NAMES))
def test_estimators_through_verls_registry_equal_ours(name: str) -> None:
    data = _random_verl_batch()
    estimator_id, needs_values = VERL_NAMES[name]
    fn = core_algos.get_adv_estimator_fn(name)
    config = {"gamma": 0.97, "lam": 0.9}
    adv, ret = fn(token_level_rewards=data["rewards"], response_mask=data["mask"], index=data["uids"],
                  config=config, values=data["values"] if needs_values else None, turn_ends=data["ends"])
    accepted = inspect.signature(vista_rl.host().spec("estimators", estimator_id).load()).parameters
    params = {k: v for k, v in config.items() if k in accepted}  # verl's algorithm.gamma/lam where they apply
    ours = vista_rl.make_estimator(estimator_id)(AdvantageBatch(
        token_rewards=data["rewards"], response_mask=data["mask"], values=data["values"] if needs_values else None,
        turn_ends=data["ends"], group_ids=torch.tensor([row // 4 for row in range(8)])), **params)
    torch.testing.assert_close(adv, ours.advantages.to(adv.dtype))
    torch.testing.assert_close(ret, ours.returns.to(ret.dtype))


def test_compute_advantage_bridge_uses_values_and_turn_rewards() -> None:
    data = _random_verl_batch(seed=3)
    last = torch.zeros_like(data["rewards"])  # what verl holds: the total on the last response token
    for row, ends in enumerate(data["turn_ends"]):
        last[row, ends[-1]] = sum(data["turn_scores"][row])
    proto = DataProto.from_dict(
        tensors={"token_level_rewards": last, "response_mask": data["mask"], "values": data["values"]},
        non_tensors={"uid": data["uids"], "turn_scores": np.array(data["turn_scores"], dtype=object),
                     "turn_ends": np.array(data["turn_ends"], dtype=object)})
    out = ray_trainer.compute_advantage(proto, "vista_bilevel_gae", gamma=1.0, lam=1.0,
                                        config={"vista_params": {"turn_gamma": 0.9}})
    ours = vista_rl.make_estimator("bilevel_gae")(AdvantageBatch(
        token_rewards=data["rewards"], response_mask=data["mask"], values=data["values"], turn_ends=data["ends"]),
        turn_gamma=0.9)
    torch.testing.assert_close(out.batch["advantages"], ours.advantages.to(torch.float64))
    # verl's own estimators are untouched by the bridge
    proto2 = DataProto.from_dict(tensors={"token_level_rewards": last, "response_mask": data["mask"]},
                                 non_tensors={"uid": data["uids"]})
    grpo = ray_trainer.compute_advantage(proto2, core_algos.AdvantageEstimator.GRPO, config={})
    expected, _ = core_algos.compute_grpo_outcome_advantage(last, data["mask"], data["uids"])
    torch.testing.assert_close(grpo.batch["advantages"], expected)


def _run_config(tmp_path: Any, model_path: str, **engine: Any) -> RunConfig:
    return RunConfig.model_validate({
        "engine": "verl", "output_dir": str(tmp_path / "run"),
        "env": {"id": "oddshape/odd-colour-v0", "config": {"grid": 3}},
        "model": {"path": model_path}, "rollout": {"max_turns": 3, "group_size": 4, "sampling": {"max_tokens": 2400}},
        "algorithm": {"estimator": "bilevel_gae", "estimator_params": {"turn_gamma": 0.95}},
        "trainer": {"steps": 5, "seeds_per_step": 8, "micro_batch_size": 1, "train_seeds": {"start": 0, "count": 20}},
        "eval": {"seeds": {"start": 1000, "count": 4}},
        "engine_config": {"verl": {"cluster": {"n_gpus_per_node": 8}, **engine}}})


def test_composed_config_passes_verls_loader_and_dry_run(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from vista_plugin_verl.engine import VerlEngine

    run = _run_config(tmp_path, tiny[2])
    engine = vista_rl.make_engine("verl", run=run)
    assert isinstance(engine, VerlEngine) and isinstance(engine, vista_rl.Engine)
    plan = engine.validate()  # composes and runs verl's validate_config; writes nothing
    assert plan.details.startswith(f"# rl: {sys.executable} -m verl.trainer.main_ppo ")
    assert not any(warning.startswith("verl is not installed") for warning in plan.warnings)
    assert not (tmp_path / "run").exists()
    (stage,) = engine.prepare()
    command, config = stage.command, stage.config
    assert command[1:3] == ["-m", "verl.trainer.main_ppo"] and (tmp_path / "run" / "data" / "train.parquet").is_file()
    assert config.algorithm.adv_estimator == "vista_bilevel_gae" and config.critic.enable is True
    assert config.algorithm.vista_params.turn_gamma == 0.95
    assert config.actor_rollout_ref.rollout.agent.default_agent_loop == "vista_agent"
    assert config.actor_rollout_ref.rollout.n == 4
    # the neutral sections, in verl's own (validated) config
    actor = config.actor_rollout_ref.actor
    assert (actor.clip_ratio_low, actor.clip_ratio_high, actor.loss_agg_mode) == (0.2, 0.2, "token-mean")
    assert (actor.optim.lr, actor.ppo_mini_batch_size, actor.kl_loss_type) == (1e-4, 8, "low_var_kl")
    assert (config.trainer.total_training_steps, config.data.train_batch_size) == (5, 8)
    assert config.critic.optim.lr == 1e-5


def test_verls_loader_rejects_a_bad_combination(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run = _run_config(tmp_path, tiny[2], overrides=["trainer.n_gpus_per_node=3"])
    overrides = compose_overrides(run, engine_config(run), "train.parquet", "val.parquet")
    with pytest.raises(ConfigError, match="real_train_batch_size"):
        compose_verl_config(overrides)
    with pytest.raises(ConfigError, match="rejected the composed overrides"):
        compose_verl_config([*overrides[:-1], "algorithm.no_such_key=1"])


def test_dataset_rows_are_read_by_verls_dataset(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    train, val = write_env_datasets(tmp_path, "oddshape/odd-colour-v0", {"grid": 3}, range(0, 6), range(100, 103),
                                    RolloutSection(max_turns=4))
    with pytest.raises(SeedOverlapError):
        write_env_datasets(tmp_path, "oddshape/odd-colour-v0", {}, range(0, 6), range(5, 8))
    processor = tiny[0]
    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 256, "return_raw_chat": True,
                               "filter_overlong_prompts": False, "truncation": "error", "cache_dir": str(tmp_path)})
    dataset = RLHFDataset(data_files=[str(train)], tokenizer=processor.tokenizer, config=config, processor=None)
    rows = [dataset[i] for i in range(len(dataset))]
    assert [row["extra_info"]["seed"] for row in rows] == list(range(6))
    assert all(row["agent_name"] == "vista_agent" for row in rows)
    val_rows = RLHFDataset(data_files=[str(val)], tokenizer=processor.tokenizer, config=config, processor=None)
    assert {val_rows[i]["extra_info"]["seed"] for i in range(3)}.isdisjoint(range(6))


def test_judges_as_verl_reward_functions() -> None:
    assert compute_score("qa", "<think>x</think><answer>42</answer>", "42")["score"] == 1.0
    assert compute_score("qa", "<answer>41</answer>", "42")["score"] == 0.0
    assert compute_score("qa", "garbage", "42", judge="no/such-judge")["score"] == 0.0


def test_vista_train_engine_verl_dry_run_cli(tiny, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`vista train --engine verl --dry-run CONFIG.yaml`: the real CLI prints the launch command."""
    import yaml

    from vista_rl.cli import main

    data = _run_config(tmp_path, tiny[2]).model_dump(mode="json")
    data["engine"] = "local"  # the flag, not the file, picks verl
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(data))
    main(["train", "--engine", "verl", "--dry-run", str(config)])  # returns normally on success
    out = capsys.readouterr().out
    assert "-m verl.trainer.main_ppo" in out and "algorithm.adv_estimator=vista_bilevel_gae" in out
    assert "adv_estimator: vista_bilevel_gae" in out  # the composed config, as verl's loader saw it
    assert not (tmp_path / "run").exists()
