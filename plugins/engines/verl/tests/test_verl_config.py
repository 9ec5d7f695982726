"""The run config -> verl mapping, without verl: runs in the main environment too.

The neutral sections (algorithm, trainer, eval, rollout) map onto verl's own keys; settings verl
cannot honour are errors that name the key; ``engine_config.verl`` holds only what verl alone has.
tests/test_verl_plugin.py checks the same overrides against verl's real loader.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from vista_plugin_verl.config import check_neutral, compose_overrides, engine_config

import vista_rl
from vista_rl import ConfigError
from vista_rl.config import RunConfig, apply_overrides

os.environ.setdefault("HF_HUB_OFFLINE", "1")
BASE: dict[str, Any] = {
    "engine": "verl", "output_dir": "runs/x", "env": {"id": "oddshape/odd-colour-v0"},
    "model": {"path": "Qwen/Qwen2.5-VL-3B-Instruct"},
    # max_tokens at the episode's budget: verl's loop caps a reply only there (see test_what_verl_would_train_differently)
    "rollout": {"max_turns": 3, "group_size": 4,
                "sampling": {"temperature": 0.7, "top_p": 0.95, "max_tokens": 2400}},
    "algorithm": {"estimator": "bilevel_gae", "estimator_params": {"gamma": 0.99, "lam": 0.9, "turn_gamma": 0.95},
                  "clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "kl_coef": 0.01, "entropy_coef": 0.001,
                  "loss_agg": "seq-mean", "ppo_epochs": 2, "mini_batches": 4, "value_clip": None},
    "trainer": {"steps": 300, "seeds_per_step": 128, "lr": 1e-6, "micro_batch_size": 2, "max_grad_norm": 1.0,
                "eval_every": 20, "checkpoint_every": 0, "keep_checkpoints": 3, "scheduler": "cosine",
                "warmup_steps": 10},
    "eval": {"seeds": {"start": 1_000_000, "count": 128}, "temperature": 0.0, "at_start": False},
    "engine_config": {"verl": {"critic_lr": 2e-5, "cluster": {"n_gpus_per_node": 4}},
                      "local": {"device": "cuda"}},  # the local engine's section: not verl's to read
}


def _run(*overrides: str) -> RunConfig:
    return RunConfig.model_validate(apply_overrides(BASE, overrides))


def _overrides(run: RunConfig) -> dict[str, str]:
    pairs = [item.split("=", 1) for item in compose_overrides(run, engine_config(run), "t.parquet", "v.parquet")]
    assert len({key for key, _ in pairs}) == len(pairs), "an override is given twice"
    return dict(pairs)


def test_neutral_sections_map_onto_verls_keys() -> None:
    got = _overrides(_run())
    actor = "actor_rollout_ref.actor"
    expected = {
        "algorithm.adv_estimator": "vista_bilevel_gae", "algorithm.gamma": "0.99", "algorithm.lam": "0.9",
        "+algorithm.vista_params.turn_gamma": "0.95",
        f"{actor}.clip_ratio_low": "0.2", f"{actor}.clip_ratio_high": "0.28", f"{actor}.loss_agg_mode": "seq-mean-token-mean",
        f"{actor}.use_kl_loss": "true", f"{actor}.kl_loss_coef": "0.01", f"{actor}.kl_loss_type": "low_var_kl",
        f"{actor}.entropy_coeff": "0.001", f"{actor}.ppo_epochs": "2", f"{actor}.optim.lr": "1e-06",
        f"{actor}.optim.lr_scheduler_type": "cosine", f"{actor}.optim.lr_warmup_steps": "10",
        f"{actor}.optim.betas": "[0.9,0.999]",
        f"{actor}.ppo_mini_batch_size": "32", f"{actor}.ppo_micro_batch_size_per_gpu": "2", f"{actor}.grad_clip": "1.0",
        "data.train_batch_size": "128", "actor_rollout_ref.rollout.n": "4",
        "actor_rollout_ref.rollout.temperature": "0.7", "actor_rollout_ref.rollout.val_kwargs.do_sample": "false",
        "trainer.total_training_steps": "300", "trainer.test_freq": "20", "trainer.save_freq": "300",
        "trainer.max_actor_ckpt_to_keep": "3", "trainer.val_before_train": "false",
        "critic.enable": "true", "critic.optim.lr": "2e-05", "critic.cliprange_value": "1000000000.0",
        "trainer.n_gpus_per_node": "4", "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": None,
    }
    assert {key: got.get(key) for key in expected} == expected


def test_a_micro_batch_larger_than_a_gpus_share_is_that_share() -> None:
    """Locally a micro-batch larger than the mini-batch is one forward per mini-batch; so in verl."""
    got = _overrides(_run("trainer.micro_batch_size=64"))
    assert got["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == "32"


def test_grpo_has_no_critic_and_no_kl_reference() -> None:
    got = _overrides(_run("algorithm.estimator=grpo", "algorithm.kl_coef=0", "algorithm.estimator_params={}"))
    assert got["critic.enable"] == "false" and "critic.optim.lr" not in got
    assert got["actor_rollout_ref.actor.use_kl_loss"] == "false"
    assert (got["algorithm.gamma"], got["algorithm.lam"]) == ("1.0", "1.0")


@pytest.mark.parametrize(("override", "key"), [
    ("algorithm.mini_batches=3", "algorithm.mini_batches"),
    ("trainer.scheduler=linear", "trainer.scheduler"),
    ("trainer.steps=0", "trainer.steps"),
    ("algorithm.estimator=no_such", "algorithm.estimator"),
    ("trainer.micro_batch_size=5", "trainer.micro_batch_size"),
    ("algorithm.estimator_params.turn_gama=0.9", "algorithm.estimator_params.turn_gama"),  # 32 seeds x 4 / 4 GPUs = 32 per GPU
])
def test_what_verl_cannot_honour_names_the_key(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        check_neutral(_run(override))


def test_verl_section_is_strict() -> None:
    with pytest.raises(ConfigError, match=r"engine_config\.verl\.cluster\.n_gpu: unknown key"):
        engine_config(_run("engine_config.verl.cluster.n_gpu=2"))
    with pytest.raises(ConfigError, match=r"engine_config\.verl\.actor_lr: unknown key"):  # now trainer.lr
        engine_config(_run("engine_config.verl.actor_lr=1e-6"))
    assert check_neutral(_run()) == []


@pytest.mark.parametrize(("overrides", "key", "fix"), [
    (["rollout.window_size=2"], "rollout.window_size", "set rollout.sequences: turn"),
    (["rollout.sequences=turn", "engine_config.verl.overrides=[trainer.use_v1=false]"], "rollout.sequences",
     "agent_loop.py:_run_agent_loop"),
    (["sft.steps=10", "sft.source=jsonl", "sft.path=p.jsonl"], "sft.source", "use sft.source: oracle"),
    (["sft.steps=10", "sft.scheduler=linear"], "sft.scheduler", "constant or cosine"),
    (["sft.steps=10", "rollout.window_size=2", "rollout.sequences=turn", "algorithm.estimator=grpo",
      "algorithm.estimator_params={}"], "rollout.window_size", "multiturn_sft_dataset.py:234-239"),
    (["model.config={dtype: bfloat16}"], "model.config", "set model.config: {}"),
])
def test_what_verl_would_train_differently_is_refused(overrides: list[str], key: str, fix: str) -> None:
    """A setting verl would silently train differently is an error naming the key and the change."""
    with pytest.raises(ConfigError) as info:
        check_neutral(_run(*overrides))
    message = str(info.value)
    assert f"\n  {key}: " in message and fix in message


def test_per_turn_rows_and_reply_limits_are_trained_not_refused() -> None:
    """Per-turn sequences become per-turn rows on verl's v1 trainer; each reply's max_tokens and stop
    and the token budget travel in the rows to the loop (dataset.env_rows: the whole rollout section)."""
    run = _run("algorithm.estimator=grpo", "algorithm.estimator_params={}", "rollout.window_size=0",
               "algorithm.turn_credit=state", "rollout.sampling.max_tokens=4", "rollout.sampling.stop=[</answer>]",
               "rollout.max_context_tokens=512")
    assert check_neutral(run) == []
    assert _overrides(run)["+algorithm.vista_turn_credit"] == "state"


def test_loggers_map_onto_verls_and_the_rest_is_a_warning() -> None:
    got = _overrides(_run("trainer.loggers=[jsonl, tensorboard, {id: wandb, project: p}]"))
    assert got["trainer.logger"] == "[console,file,tensorboard,wandb]"
    assert got["+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR"].endswith("runs/x/tensorboard")
    (warning,) = check_neutral(_run("trainer.loggers=[jsonl, no_such_tracker]"))
    assert warning.startswith("trainer.loggers: verl has no no_such_tracker logger")


ENV = "+ray_kwargs.ray_init.runtime_env.env_vars."


def test_each_loggers_options_reach_verls_tracking() -> None:
    """A wandb project is verl's project_name (it was always 'vista'); the rest goes where
    verl/utils/tracking.py reads it; wandb stays offline by default, as the local logger is."""
    got = _overrides(_run("trainer.loggers=[{id: wandb, project: p, entity: team, name: run-1, group: g, "
                          "tags: [a, b]}, {id: tensorboard, log_dir: tb}, {id: mlflow, experiment: p, "
                          "tracking_uri: 'http://127.0.0.1:5000'}]"))
    assert (got["trainer.project_name"], got["trainer.experiment_name"]) == ("p", "run-1")
    assert got["trainer.logger"] == "[console,wandb,tensorboard,mlflow]"
    assert (got[ENV + "WANDB_ENTITY"], got[ENV + "WANDB_RUN_GROUP"], got[ENV + "WANDB_TAGS"]) == ("team", "g", "'a,b'")
    assert got[ENV + "WANDB_MODE"] == "offline" and got[ENV + "WANDB_DIR"].endswith("runs/x")
    assert got[ENV + "TENSORBOARD_DIR"].endswith("runs/x/tb")
    assert got[ENV + "MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5000"
    default = _overrides(_run("trainer.loggers=[mlflow]"))
    assert default["trainer.project_name"] == "vista" and default[ENV + "MLFLOW_TRACKING_URI"].endswith("runs/x/mlruns")
    assert _overrides(_run("trainer.loggers=[{id: wandb, mode: online}]"))[ENV + "WANDB_MODE"] == "online"


@pytest.mark.parametrize(("loggers", "message"), [
    ("[{id: wandb, project: a}, {id: mlflow, experiment: b}]", r"trainer\.loggers\[1\]\.experiment: verl gives"),
    ("[{id: mlflow, tags: {k: v}}]", r"trainer\.loggers\[0\]\.tags: verl's mlflow logger has no setting"),
    ("[{id: wandb, projet: a}]", r"trainer\.loggers\[0\]\.projet: "),
    ("[{id: wandb, mode: shared}]", r"trainer\.loggers\[0\]\.mode: "),
])
def test_a_logger_option_verl_cannot_honour_is_refused_by_name(loggers: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_neutral(_run(f"trainer.loggers={loggers}"))


def test_without_flash_attn_the_workers_get_sdpa_unless_the_overrides_say_otherwise() -> None:
    """verl builds models with flash_attention_2 (verl/workers/config/model.py:185); verl[vllm] lacks it."""
    run = _run()
    with_flash = _overrides(run)
    assert "actor_rollout_ref.model.use_remove_padding" not in with_flash
    pairs = compose_overrides(run, engine_config(run), "t", "v", flash_attn=False)
    for model in ("actor_rollout_ref.model", "critic.model"):  # BASE trains a critic
        assert f"{model}.use_remove_padding=false" in pairs
        assert f"+{model}.override_config.attn_implementation=sdpa" in pairs
    own = _run("engine_config.verl.overrides=[actor_rollout_ref.model.use_remove_padding=true]")
    pairs = compose_overrides(own, engine_config(own), "t", "v", flash_attn=False)
    assert "actor_rollout_ref.model.use_remove_padding=false" not in pairs and pairs[-1].endswith("=true")


def test_the_dry_run_says_when_flash_attn_is_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                                                     tiny_model_dir: Any) -> None:
    from vista_plugin_verl import attention

    run = _run(f"output_dir={tmp_path / 'run'}", f"model.path={tiny_model_dir}")
    monkeypatch.setattr(attention, "flash_attn_installed", lambda python: False)
    plan = vista_rl.make_engine("verl", run=run).validate()
    assert any(w.startswith("flash-attn is not installed") for w in plan.warnings)
    assert "+actor_rollout_ref.model.override_config.attn_implementation=sdpa" in plan.details
    monkeypatch.setattr(attention, "flash_attn_installed", lambda python: True)
    assert "attn_implementation=sdpa" not in vista_rl.make_engine("verl", run=run).validate().details


def test_a_launch_without_verl_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Not ModuleNotFoundError: No module named 'omegaconf' (issue 35)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "verl" else real(name, *a))
    engine = vista_rl.make_engine("verl", run=_run(f"output_dir={tmp_path / 'run'}"))
    with pytest.raises(ConfigError, match=r"needs verl installed .*pip install -e 'plugins/engines/verl\[verl\]'"):
        engine.run()
    assert not (tmp_path / "run").exists()


def test_validate_writes_nothing_and_resumes_from_verls_last_checkpoint(tmp_path: Any, tiny_model_dir: Any) -> None:
    # a local model: where verl is installed, its loader reads the model's config
    run = _run(f"output_dir={tmp_path / 'run'}", f"model.path={tiny_model_dir}")
    plan = vista_rl.make_engine("verl", run=run).validate()
    assert plan.engine == "verl" and "-m verl.trainer.main_ppo" in plan.details
    assert not (tmp_path / "run").exists()
    assert "trainer.resume_mode=disable" in plan.details  # a fresh run never picks up old checkpoints
    with pytest.raises(ConfigError, match="--resume .*: no verl checkpoint there"):
        vista_rl.make_engine("verl", run=run, resume=tmp_path / "run").validate()
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("3")
    assert "trainer.resume_mode=auto" in vista_rl.make_engine("verl", run=run, resume=tmp_path / "run").validate().details


def test_the_readme_recipe_validates(tmp_path: Any, tiny_model_dir: Any) -> None:
    """The GPU recipe in README.md is a valid run config for this engine (verl's loader checks it too
    where verl is installed, with a local model in place of the hub id: nothing here reaches the hub)."""
    import re
    from pathlib import Path

    import yaml

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, re.DOTALL) if "engine: verl" in b]
    data = yaml.safe_load(block)
    data["output_dir"] = str(tmp_path / "run")
    data["model"]["path"] = str(tiny_model_dir)
    if data["env"]["id"] not in vista_rl.host().registry("envs").ids():  # the verl venv has no sokoban plugin
        data["env"] = {"id": "oddshape/odd-colour-v0"}
    plan = vista_rl.make_engine("verl", run=RunConfig.model_validate(data)).validate()
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=32" in plan.details
    assert not any(warning.startswith("sft") for warning in plan.warnings)


def _example(name: str, *overrides: str) -> RunConfig:
    from pathlib import Path

    from vista_rl.config import load_config

    path = Path(__file__).resolve().parents[4] / "examples" / f"{name}.yaml"
    return load_config(RunConfig, path, ["model.path=m", "output_dir=runs/x", *overrides])


EXAMPLES = sorted(path.stem for path in (Path(__file__).resolve().parents[4] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_config_trains_on_verl_as_it_is(example: str, tmp_path: Any, tiny_model_dir: Any) -> None:
    """Every config in examples/ validates for verl unchanged: the SFT stage on verl's SFT trainer, then
    RL from its model (per-turn rows where the config asks for them); where verl is installed
    (scripts/test.d/verl.sh), every stage's config through verl's own loader."""
    import importlib.util

    from vista_plugin_verl.config import trains_differently

    assert trains_differently(_example(example), engine_config(_example(example))) == []
    run = _example(example, f"model.path={tiny_model_dir}", f"output_dir={tmp_path / 'run'}")
    if run.env.id not in vista_rl.host().registry("envs").ids():  # the verl venv has no frozenlake/svg/... plugin
        run = run.model_copy(update={"env": run.env.model_copy(update={"id": "oddshape/odd-colour-v0", "config": {}})})
    plan = vista_rl.make_engine("verl", run=run).validate()
    stages = [line.split(":", 1)[0][2:] for line in plan.details.splitlines() if line.startswith("# ")]
    assert stages == (["eval_untrained"] if run.eval.at_start else []) + ["sft", "rl"]
    assert "models/sft" not in plan.details and f"{tmp_path / 'run' / 'sft' / 'checkpoints'}" in plan.details
    verl_here = importlib.util.find_spec("verl") is not None
    assert any(warning.startswith("verl is not installed") for warning in plan.warnings) is not verl_here
    if verl_here:
        assert f"adv_estimator: vista_{run.algorithm.estimator}" in plan.details  # verl's composed config
    assert not (tmp_path / "run").exists()


def test_verls_default_trainer_without_transfer_queue_is_caught_before_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl 0.9.1's v1 trainer imports transfer_queue (verl[verl-core]); without it main_ppo would fail
    only after Ray and the workers started, so the engine says so first (a warning in the dry run)."""
    import importlib.util
    from types import SimpleNamespace

    from vista_plugin_verl.engine import VerlEngine

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transfer_queue" else real(name, *a))
    engine = VerlEngine(_run())
    message = engine._missing_trainer_module(SimpleNamespace(trainer={"use_v1": True}))
    assert message is not None and message.startswith("trainer.use_v1: ") and "verl[verl-core]" in message
    assert engine._missing_trainer_module(SimpleNamespace(trainer={"use_v1": False})) is None
    assert VerlEngine(_run("engine_config.verl.python=/other/python"))._missing_trainer_module(
        SimpleNamespace(trainer={"use_v1": True})) is None  # another interpreter runs verl: not ours to check
