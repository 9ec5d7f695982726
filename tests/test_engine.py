"""The local engine on a tiny real Qwen2.5-VL and real envs: configs, losses, token views, SFT/GRPO/PPO
steps, resume == uninterrupted, and bad input (NaN, full disk, broken data, missing model)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import torch
from vista_plugin_local.config import validate_engine_config
from vista_plugin_local.losses import Denominators, aggregate, clipped_policy_loss, kl_k3
from vista_plugin_local.trainer import LocalEngine, TrainingError

from tests.engine_helpers import FROZENLAKE, run_config
from vista_rl.config import RolloutSection, RunConfig, validate_config
from vista_rl.errors import ConfigError, VistaError

pytest.importorskip("transformers")


def _state(run_dir: Path) -> dict[str, torch.Tensor]:
    from vista_plugin_local.checkpoint import load_checkpoint

    return load_checkpoint(run_dir)["policy"]["model"]  # type: ignore[no-any-return]


def _rows(path: Path) -> list[dict[str, object]]:
    drop = {"seconds", "time_rollout_s", "time_logprob_s", "time_update_s", "time_step_s", "gen_tokens_per_s",
            "tokens_per_s"}
    return [{k: v for k, v in json.loads(line).items() if k not in drop}
            for line in path.read_text().splitlines() if line.strip()]


# ----------------------------------------------------------------------------- config
def test_engine_config_errors_name_the_key(tmp_path: Path) -> None:
    base = {"env": {"id": "oddshape/odd-colour-v0"}, "output_dir": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"trainer\.lrr: unknown key"):
        validate_config(RunConfig, {**base, "trainer": {"lrr": 1}})
    with pytest.raises(ConfigError, match=r"algorithm\.loss_agg"):
        validate_config(RunConfig, {**base, "algorithm": {"loss_agg": "sum"}})
    overlapping = {"trainer": {"train_seeds": {"start": 0, "count": 100}}, "eval": {"seeds": {"start": 50}}}
    with pytest.raises(ConfigError, match="overlaps eval.seeds"):
        validate_config(RunConfig, {**base, **overlapping})
    # the local engine's own section: its keys, under engine_config.local
    run = validate_config(RunConfig, {**base, "engine_config": {"local": {"devise": "cpu"}}})
    with pytest.raises(ConfigError, match=r"engine_config\.local\.devise: unknown key"):
        validate_engine_config(run)
    run = validate_config(RunConfig, {**base, "engine_config": {"local": {"lora": {"r": 0}}}})
    with pytest.raises(ConfigError, match=r"engine_config\.local\.lora\.r"):
        validate_engine_config(run)


def test_local_view_merges_the_neutral_sections_and_its_own(tmp_path: Path) -> None:
    run = validate_config(RunConfig, {
        "env": {"id": "oddshape/odd-colour-v0"}, "output_dir": str(tmp_path),
        "rollout": {"batch_size": 7}, "algorithm": {"estimator": "gae", "clip_ratio_high": 0.28},
        "trainer": {"lr": 0.5, "micro_batch_size": 3}, "eval": {"temperature": 1.0},
        "engine_config": {"local": {"precision": "fp32", "value_coef": 0.25, "lora": {"enabled": True}},
                          "verl": {"cluster": {"nnodes": 4}}},  # another engine's section: not ours to read
    })
    view = validate_engine_config(run)
    assert (view.algorithm.clip_ratio_high, view.local.value_coef, view.algorithm.uses_critic) == (0.28, 0.25, True)
    assert (view.trainer.lr, view.trainer.micro_batch_size, view.local.precision) == (0.5, 3, "fp32")
    assert (view.eval.temperature, view.local.lora.enabled) == (1.0, True)


def test_missing_model_dir_and_unknown_estimator_are_clear(tmp_path: Path, tiny_model_dir: Path) -> None:
    run = run_config(tmp_path / "nope", tmp_path / "run")
    with pytest.raises(ConfigError, match=r"model\.path: .*nope is not a directory"):
        LocalEngine(run).run()
    run = run_config(tiny_model_dir, tmp_path / "run2",
                     overrides=("algorithm.estimator=no_such_estimator", "sft.steps=0"))
    with pytest.raises(ConfigError, match=r"algorithm\.estimator"):
        LocalEngine(run).run()


# ----------------------------------------------------------------------------- losses
def test_clipped_policy_loss_matches_hand_computation() -> None:
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.0]]))
    old = torch.zeros((1, 3))
    adv = torch.tensor([[1.0, -1.0, 2.0]])
    loss, clipped = clipped_policy_loss(logp, old, adv, 0.2, 0.3)
    # ratio 1.5 with A=1 clips at 1.3; ratio 0.5 with A=-1 clips at 0.8; ratio 1 is untouched.
    assert torch.allclose(loss, torch.tensor([[-1.3, 0.8, -2.0]]))
    assert clipped.tolist() == [[1.0, 1.0, 0.0]]
    assert float(kl_k3(logp, logp).abs().max()) == 0.0
    assert float(kl_k3(logp, old).min()) >= 0.0


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean"])
def test_aggregation_over_micro_batches_equals_one_batch(mode: str) -> None:
    values = torch.randn(4, 6)
    mask = (torch.rand(4, 6) > 0.3).float()
    mask[:, 0] = 1
    denom = Denominators(tokens=float(mask.sum()), sequences=4.0)
    whole = aggregate(values, mask, mode, denom)
    split = aggregate(values[:1], mask[:1], mode, denom) + aggregate(values[1:], mask[1:], mode, denom)
    assert torch.allclose(whole, split)
    expected = (values * mask).sum() / mask.sum() if mode == "token-mean" else \
        ((values * mask).sum(-1) / mask.sum(-1)).mean()
    assert torch.allclose(whole, expected)


# ------------------------------------------------------------------------- token view
def test_sft_tokens_of_oracle_rollouts_mask_only_assistant_tokens(tiny_model_dir: Path) -> None:
    """SFT data comes from the core rollout engine playing the env's oracle: the loss covers exactly
    the oracle responses (and their <|im_end|>), every observation image is in the sequence."""
    from vista_plugin_local.policy import Policy, load_pretrained
    from vista_plugin_local.sft_data import tokens_from_trajectory

    import vista_rl
    from vista_rl.rollout import RolloutEngine, episode_specs

    model, processor = load_pretrained(str(tiny_model_dir))
    encoder = Policy(model, processor, torch.device("cpu")).encoder
    settings = RolloutSection(max_turns=4)
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle"), settings) as engine:
        (trajectory,) = engine.run(episode_specs(FROZENLAKE["id"], [7], 1, FROZENLAKE["config"]))
    tokens = tokens_from_trajectory(trajectory, encoder)
    assert trajectory.success and trajectory.num_turns >= 2
    assert len(tokens.turn_ends) == trajectory.num_turns == len(tokens.images)
    image_tokens = sum(1 for i in tokens.input_ids if i == encoder.image_token_id)
    assert image_tokens == sum(encoder.vision_tokens(im) for im in tokens.images)
    assert image_tokens == sum(int(im.grid_thw.prod()) // 4 for im in tokens.images)
    trained = [i for i, m in zip(tokens.input_ids, tokens.loss_mask, strict=True) if m]
    expected = [i for turn in trajectory.turns for i in encoder.response_ids(turn.response)]
    assert trained == expected
    assert all(tokens.input_ids[end] == encoder.im_end_id for end in tokens.turn_ends)


# ------------------------------------------------------------------------------ runs
def test_resumed_run_equals_uninterrupted_run(tmp_path: Path, tiny_model_dir: Path) -> None:
    overrides = ("trainer.checkpoint_every=1",)
    straight = LocalEngine(run_config(tiny_model_dir, tmp_path / "a", overrides=overrides))
    straight.run()

    def interrupt(stage: str, step: int) -> None:
        if stage == "rl" and step == 1:
            raise KeyboardInterrupt

    run_b = run_config(tiny_model_dir, tmp_path / "b", overrides=overrides)
    with pytest.raises(KeyboardInterrupt):
        LocalEngine(run_b, step_hook=interrupt).run()
    assert any((p / "state.json").exists() for p in (tmp_path / "b" / "checkpoints").iterdir())
    LocalEngine(run_b, resume=tmp_path / "b").run()

    a, b = _state(tmp_path / "a"), _state(tmp_path / "b")
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert _rows(tmp_path / "a" / "metrics.jsonl") == _rows(tmp_path / "b" / "metrics.jsonl")
    metrics = _rows(tmp_path / "a" / "metrics.jsonl")
    assert [row["stage"] for row in metrics] == ["sft", "sft", "rl", "rl"]
    assert {"reward_mean", "success_rate", "kl", "entropy", "clip_fraction", "grad_norm", "tokens_per_s",
            "time_rollout_s"} <= set(json.loads((tmp_path / "a" / "metrics.jsonl").read_text().splitlines()[-1]))
    results = json.loads((tmp_path / "a" / "results.json").read_text())
    assert set(results["evals"]) == {"sft", "rl"}
    assert (tmp_path / "a" / "models" / "final" / "config.json").exists()


def test_ppo_with_value_head_bilevel_gae_and_kl(tmp_path: Path, tiny_model_dir: Path) -> None:
    env = {"id": FROZENLAKE["id"], "config": {**FROZENLAKE["config"], "step_penalty": -0.1}}  # non-zero returns
    run = run_config(tiny_model_dir, tmp_path / "ppo", env=env, max_turns=3, overrides=(
        "algorithm.estimator=bilevel_gae", "algorithm.kl_coef=0.1",
        "algorithm.mini_batches=2", "sft.steps=1", "trainer.steps=1",
        "eval.after_sft=false"))
    engine = LocalEngine(run)
    engine.run()
    assert engine.policy.value_head is not None
    row = json.loads((tmp_path / "ppo" / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["optimizer_steps"] == 2
    assert row["value_loss"] > 0 and row["kl"] >= 0
    assert row["turns_mean"] >= 1


def test_lora_trains_adapters_only(tmp_path: Path, tiny_model_dir: Path) -> None:
    pytest.importorskip("peft")
    run = run_config(tiny_model_dir, tmp_path / "lora", overrides=(
        "engine_config.local.lora.enabled=true", "sft.steps=2", "trainer.steps=0",
        "sft.lr=0.01"))
    engine = LocalEngine(run)
    before = {k: v.clone() for k, v in engine._build_policy().model.state_dict().items()}
    engine.run()
    after = engine.policy.model.state_dict()
    lora_keys = [k for k in after if "lora_" in k]
    assert lora_keys
    assert any(not torch.equal(after[k], before[k]) for k in lora_keys if "lora_B" in k)
    base = [k for k in after if "lora_" not in k and k in before]
    assert base and all(torch.equal(after[k], before[k]) for k in base)


def test_sft_schedule_warms_up_then_decays(tmp_path: Path, tiny_model_dir: Path) -> None:
    run = run_config(tiny_model_dir, tmp_path / "sched", overrides=(
        "sft.steps=4", "sft.warmup_steps=1", "sft.scheduler=cosine", "sft.lr=0.01", "trainer.steps=0",
        "eval.at_start=false", "eval.after_sft=false"))
    LocalEngine(run).run()
    lrs = [row["lr"] for row in _rows(tmp_path / "sched" / "metrics.jsonl") if row["stage"] == "sft"]
    assert lrs == pytest.approx([0.01, 0.01, 0.0075, 0.0025])  # warm-up step, then cosine over 3 steps


# ---------------------------------------------------------------------------- bad input
def test_nan_steps_are_skipped_reported_and_stop_the_run(tmp_path: Path, tiny_model_dir: Path) -> None:
    run = run_config(tiny_model_dir, tmp_path / "nan", overrides=(
        "sft.steps=6", "engine_config.local.max_nan_steps=2"))
    engine: LocalEngine

    def poison(stage: str, step: int) -> None:
        if stage == "sft" and step == 1:  # a real NaN in the weights, as a diverging run produces
            with torch.no_grad():
                engine.policy.model.lm_head.weight.fill_(float("nan"))

    engine = LocalEngine(run, step_hook=poison)
    with pytest.raises(TrainingError, match=r"stopped after 2 non-finite steps \(global steps \[2, 3\]\)"):
        engine.run()
    rows = _rows(tmp_path / "nan" / "metrics.jsonl")
    assert [row["nan_skipped"] for row in rows] == [False, True, True]
    assert (tmp_path / "nan" / "checkpoints").is_dir()


def test_disk_full_while_checkpointing_keeps_the_previous_checkpoint(
        tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vista_plugin_local.checkpoint as checkpoint

    run = run_config(tiny_model_dir, tmp_path / "full", overrides=(
        "trainer.checkpoint_every=1", "trainer.steps=0"))
    real_save = checkpoint.save_file
    calls = {"n": 0}

    def save_until_full(tensors: object, path: object, metadata: object = None) -> None:  # fake: full on the 2nd save
        calls["n"] += 1
        if calls["n"] >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(tensors, path, metadata=metadata)

    monkeypatch.setattr(checkpoint, "save_file", save_until_full)
    with pytest.raises(VistaError, match=r"out of disk space .* previous checkpoint .*step-000001 is intact"):
        LocalEngine(run).run()
    remaining = [p.name for p in (tmp_path / "full" / "checkpoints").iterdir()]
    assert remaining == ["step-000001"]
    assert len(_rows(tmp_path / "full" / "metrics.jsonl")) == 2


def test_sft_from_jsonl_skips_broken_rows(tmp_path: Path, tiny_model_dir: Path) -> None:
    from PIL import Image
    from vista_plugin_local.chat_tokens import ChatEncoder
    from vista_plugin_local.policy import load_pretrained
    from vista_plugin_local.sft_data import load_jsonl

    (tmp_path / "images").mkdir()
    Image.new("RGB", (56, 56), (200, 0, 0)).save(tmp_path / "images" / "abc.png")
    good = {"system_prompt": "Say the colour.", "turns": [
        {"observation": "<image>\nWhich colour?", "image_refs": ["abc"], "response": "<answer>red</answer>"}]}
    lines = [json.dumps(good), "{not json", json.dumps({"turns": []}),
             json.dumps({"turns": [{"observation": "<image>", "image_refs": ["missing"], "response": "x"}]}),
             json.dumps(good)]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    _model, processor = load_pretrained(str(tiny_model_dir))
    examples, report = load_jsonl(path, ChatEncoder(processor))
    assert len(examples) == 2 and report.rows == 2
    assert [line for line, _ in report.skipped] == [2, 3, 4]
    assert "skipped 3 broken rows" in report.summary() and "line 4" in report.summary()
    path.write_text("{bad\n")
    with pytest.raises(VistaError, match="no usable trajectories"):
        load_jsonl(path, ChatEncoder(processor))


def test_chat_encoder_expands_images_as_the_processor_does(tiny_model_dir: Path) -> None:
    """The encoder runs the image processor and expands the vision tokens itself (faster, and once
    per image); ids and pixel tensors must equal the processor's own call."""
    from PIL import Image
    from vista_plugin_local.chat_tokens import VISION_SPAN, ChatEncoder
    from vista_plugin_local.policy import load_pretrained

    _model, processor = load_pretrained(str(tiny_model_dir))
    encoder = ChatEncoder(processor)
    images = [Image.new("RGB", (56, 84), (200, 10, 10)), Image.new("RGB", (112, 56), (0, 90, 200))]
    text = "<|im_start|>user\n<image> left, right: <image>\nWhich is red?<|im_end|>\n"
    ids, vision = encoder.encode(text, images)
    reference = processor(text=[text.replace("<image>", VISION_SPAN)], images=images, return_tensors="pt")
    assert ids == reference["input_ids"][0].tolist()
    assert torch.equal(torch.cat([v.pixel_values for v in vision]), reference["pixel_values"])
    assert torch.equal(torch.stack([v.grid_thw for v in vision]), reference["image_grid_thw"])
    again, reused = encoder.encode(text, images, vision)
    assert again == ids and reused == vision
    with pytest.raises(ValueError, match="image_pad"):
        encoder.encode("<|image_pad|> <image>", images[:1])
