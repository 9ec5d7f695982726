"""No run-config key reaches ``--engine verl`` without being mapped or refused.

Every field of ``RunConfig`` (and of ``engine_config.local`` and ``engine_config.verl``) is walked; each
must be named in ``vista_plugin_verl.coverage`` and have a changed value in :data:`CHANGES` here.  The
key is then changed alone (in the context ``coverage.CONTEXT`` names, where it matters only with
another setting) and the change must show: in verl's command and overrides or the dataset rows
(mapped), as an error naming the key (refused), or as a warning naming it (changes nothing verl
trains).  A new field, or one whose change vanishes, fails here.  Runs without verl.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from vista_plugin_verl import coverage, local_section, sft
from vista_plugin_verl.config import VerlEngineConfig, check_neutral, compose_overrides, engine_config
from vista_plugin_verl.dataset import run_rows
from vista_plugin_verl.engine import VerlEngine

from vista_rl import ConfigError
from vista_rl.config import RunConfig, apply_overrides

os.environ.setdefault("HF_HUB_OFFLINE", "1")
BASE: dict[str, Any] = {
    "engine": "verl", "output_dir": "runs/x", "env": {"id": "oddshape/odd-colour-v0"}, "model": {"path": "m"},
    "rollout": {"max_turns": 3, "group_size": 4, "sampling": {"max_tokens": 2400}},
    "trainer": {"steps": 3, "seeds_per_step": 8, "micro_batch_size": 2, "train_seeds": {"start": 0, "count": 100}},
    "eval": {"seeds": {"start": 100_000, "count": 8}},
    "engine_config": {"verl": {"cluster": {"n_gpus_per_node": 4}}},
}

#: One changed (valid) value per key; a key missing here fails the walk.
CHANGES: dict[str, Any] = {
    "seed": 1, "output_dir": "runs/y", "env.id": "oddshape/odd-shape-v0", "env.config": {"difficulty": 2},
    "model.backend": "vllm", "model.path": "other", "model.config": {"dtype": "bfloat16"},
    "rollout.max_turns": 4, "rollout.group_size": 8, "rollout.window_size": 0, "rollout.sequences": "turn",
    "rollout.max_context_tokens": 512, "rollout.image_size": 56, "rollout.reflection": True, "rollout.reflection_attempts": 2,
    "rollout.env_timeout_s": 30.0, "rollout.tool_timeout_s": 10.0, "rollout.sampling.temperature": 0.5,
    "rollout.sampling.top_p": 0.9, "rollout.sampling.max_tokens": 64, "rollout.sampling.stop": ["</answer>"],
    "rollout.episodes": 5, "rollout.batch_size": 8, "rollout.max_workers": 4, "rollout.model_workers": 2,
    "rollout.model_worker_mode": "ray", "rollout.model_worker_options": {"start_timeout_s": 5},
    "rollout.tool_response_role": "tool", "rollout.describe_tools": False,
    "rollout.tools": {"crop_zoom": {"config": {"crop_size": 56}}},
    "algorithm.estimator": "rloo", "algorithm.estimator_params": {"norm_by_std": False},
    "algorithm.clip_ratio_low": 0.1, "algorithm.clip_ratio_high": 0.3, "algorithm.kl_coef": 0.01,
    "algorithm.entropy_coef": 0.001, "algorithm.loss_agg": "seq-mean", "algorithm.turn_credit": "state",
    "algorithm.ppo_epochs": 2, "algorithm.mini_batches": 2, "algorithm.critic": True, "algorithm.value_clip": 0.3,
    "trainer.steps": 5, "trainer.seeds_per_step": 16, "trainer.train_seeds.start": 10,
    "trainer.train_seeds.count": 50, "trainer.lr": 3e-4, "trainer.weight_decay": 0.1, "trainer.betas": [0.9, 0.95],
    "trainer.warmup_steps": 3, "trainer.scheduler": "cosine", "trainer.micro_batch_size": 4,
    "trainer.max_grad_norm": 0.5, "trainer.checkpoint_every": 2, "trainer.keep_checkpoints": 3,
    "trainer.eval_every": 2, "trainer.loggers": ["jsonl"],
    "sft.steps": 10, "sft.source": "jsonl", "sft.path": "other.jsonl", "sft.seeds.start": 60_000,
    "sft.seeds.count": 3, "sft.batch_size": 4, "sft.lr": 1e-4, "sft.warmup_steps": 2, "sft.scheduler": "cosine",
    "sft.max_grad_norm": 0.5, "sft.keep_failed": True,
    "eval.seeds.start": 200_000, "eval.seeds.count": 10, "eval.temperature": 0.5, "eval.at_start": False,
    "eval.after_sft": False,
    "engine_config.local.device": "cpu", "engine_config.local.precision": "fp32",
    "engine_config.local.image_size": 28, "engine_config.local.max_nan_steps": 5,
    "engine_config.local.value_coef": 1.0, "engine_config.local.lora.enabled": True,
    "engine_config.local.lora.r": 4, "engine_config.local.lora.alpha": 8, "engine_config.local.lora.dropout": 0.1,
    "engine_config.local.lora.target_modules": ["q_proj"], "engine_config.local.packing": False,
    "engine_config.local.shared_prefix": True,
    "engine_config.local.static_decode": "on",
    "engine_config.verl.critic_lr": 2e-5, "engine_config.verl.cluster.n_gpus_per_node": 8,
    "engine_config.verl.cluster.nnodes": 2, "engine_config.verl.cluster.rollout_backend": "sglang",
    "engine_config.verl.cluster.tensor_parallel_size": 2, "engine_config.verl.cluster.gpu_memory_utilization": 0.6,
    "engine_config.verl.cluster.max_prompt_length": 1024, "engine_config.verl.cluster.max_response_length": 1200,
    "engine_config.verl.overrides": ["trainer.val_only=true"], "engine_config.verl.python": "/usr/bin/python3",
    "engine_config.verl.sft_overrides": ["data.num_workers=1"],
}
#: Keys whose treatment is structural, not a value verl reads.
STRUCTURAL = {"engine"}


def _leaves(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _leaves(annotation, f"{prefix}{name}.")
        elif not (prefix == "" and name == "engine_config"):
            yield prefix + name


def _dict_leaves(data: dict[str, Any], prefix: str) -> Iterator[str]:
    for name, value in data.items():
        if isinstance(value, dict):
            yield from _dict_leaves(value, f"{prefix}{name}.")
        else:
            yield prefix + name


def every_key() -> list[str]:
    """Every leaf of the run config, the engine sections included."""
    keys = list(_leaves(RunConfig))
    keys += list(_dict_leaves(local_section.DEFAULTS, "engine_config.local."))
    keys += list(_leaves(VerlEngineConfig, "engine_config.verl."))
    return keys


def _run(*overrides: str) -> RunConfig:
    return RunConfig.model_validate(apply_overrides(BASE, overrides))


def effect(run: RunConfig) -> tuple[str, Any]:
    """What the verl engine makes of ``run``: ``("refused", message)`` or ``("ok", what reaches verl)``
    with the warnings."""
    try:
        warnings = check_neutral(run)
    except ConfigError as exc:
        return "refused", str(exc)
    commands = [stage.command for stage in VerlEngine(run).stages(flash_attn=True)]
    rows = json.dumps(run_rows(run), sort_keys=True, default=str)
    if run.sft.steps:  # the SFT stage's rows: the oracle's episodes, cut as the local engine cuts them
        rows += json.dumps(sft.oracle_rows(run)[0], sort_keys=True, default=lambda value: hashlib.sha1(value).hexdigest())
    return "ok", (commands, rows, warnings)


def _setting(key: str, value: Any) -> str:
    return f"{key}={json.dumps(value)}"


def test_every_key_is_named_and_has_a_change() -> None:
    keys = every_key()
    unnamed = [key for key in keys if not coverage.treatment(key)]
    assert not unnamed, f"run-config keys the verl engine neither maps nor refuses: {unnamed} (vista_plugin_verl.coverage)"
    unchanged = [key for key in keys if key not in CHANGES and key not in STRUCTURAL]
    assert not unchanged, f"add a changed value for {unchanged} to CHANGES"
    named = set(coverage.MAPPED) | set(coverage.REFUSED) | set(coverage.NOT_TRAINED)
    assert sorted(named - set(keys)) == [], "coverage names keys the run config does not have"


@pytest.mark.parametrize("key", [key for key in every_key() if key not in STRUCTURAL])
def test_a_changed_key_reaches_verl_or_is_refused_or_named(key: str) -> None:
    context = coverage.CONTEXT.get(key, ())
    base_kind, base = effect(_run(*context))
    changed_kind, changed = effect(_run(*context, _setting(key, CHANGES[key])))
    switches = {item.split("=", 1)[0] for item in context}
    if changed_kind == "refused":
        assert "refused" in coverage.treatment(key), f"{key} is refused but coverage says {coverage.treatment(key)}"
        named = [name for name in (key, *switches) if name in changed]
        assert named, f"the refusal of {key} does not name it:\n{changed}"
        return
    assert base_kind == "ok", base
    command, rows, warnings = changed
    if any(warning.startswith(f"{key}:") for warning in warnings) and warnings != base[2]:
        assert {"not trained", "mapped"} & set(coverage.treatment(key)), key
        return
    assert "mapped" in coverage.treatment(key), f"{key} changes nothing verl trains but coverage says mapped"
    assert (command, rows) != base[:2], f"{key}={CHANGES[key]!r} changed nothing that reaches verl"


@pytest.mark.parametrize(("setting", "message"), [
    ("engine_config.local.devise=cuda", r"engine_config\.local\.devise: unknown key"),
    ("engine_config.local.lora.rank=4", r"engine_config\.local\.lora\.rank: unknown key"),
])
def test_a_misspelt_local_key_is_an_error_on_verl_too(setting: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_neutral(_run(setting))


def test_lora_maps_onto_verls_keys() -> None:
    got = compose_overrides(_run("engine_config.local.lora.enabled=true", "engine_config.local.lora.r=4",
                                 "engine_config.local.lora.alpha=8", "engine_config.local.lora.target_modules=[q_proj,v_proj]"),
                            engine_config(_run()), "t", "v")
    for expected in ("actor_rollout_ref.model.lora_rank=4", "actor_rollout_ref.model.lora_alpha=8",
                     "actor_rollout_ref.model.target_modules=[q_proj,v_proj]"):
        assert expected in got
    assert not any("lora_rank" in item for item in compose_overrides(_run(), engine_config(_run()), "t", "v"))


def test_a_micro_batch_larger_than_a_gpus_share_is_named() -> None:
    """16 GPUs, 8 seeds x 4 samples: 2 sequences a GPU, so a micro-batch of 3 becomes 2, with a word."""
    run = _run("engine_config.verl.cluster.n_gpus_per_node=16", "trainer.micro_batch_size=3")
    (warning,) = [w for w in check_neutral(run) if w.startswith("trainer.micro_batch_size")]
    assert "2 sequences on 16 GPUs" in warning and "verl's micro-batch is 2" in warning


@pytest.mark.skipif(importlib.util.find_spec("vista_plugin_local") is None, reason="needs the local engine's plugin")
def test_the_local_sections_keys_and_defaults_are_the_local_engines() -> None:
    """``local_section.DEFAULTS`` (used where the local plugin is not installed) is LocalSection's."""
    from vista_plugin_local.config import LocalSection

    assert LocalSection().model_dump() == local_section.DEFAULTS


# --------------------------------------------------------------- the local engine checks verl's section
needs_local = pytest.mark.skipif(importlib.util.find_spec("vista_plugin_local") is None,
                                 reason="needs the local engine's plugin")


@needs_local
@pytest.mark.parametrize("verl_schema", [True, False], ids=["verl-installed", "verl-absent"])
@pytest.mark.parametrize(("setting", "message"), [
    ("engine_config.verl.critc_lr=1e-5", r"engine_config\.verl\.critc_lr: unknown key"),
    ("engine_config.verl.cluster.nodes=2", r"engine_config\.verl\.cluster\.nodes: unknown key"),
])
def test_a_misspelt_verl_key_is_an_error_on_local_too(monkeypatch: pytest.MonkeyPatch, verl_schema: bool,
                                                      setting: str, message: str) -> None:
    """The mirror of the test above: ``--engine local`` refuses a misspelt ``engine_config.verl`` key,
    with the verl plugin installed (its schema) and without it (``verl_section.KEYS``)."""
    from vista_plugin_local import verl_section
    from vista_plugin_local.config import validate_engine_config

    if not verl_schema:
        monkeypatch.setattr(verl_section, "verl_schema", lambda: None)
    with pytest.raises(ConfigError, match=message):
        validate_engine_config(_run(setting).model_copy(update={"engine": "local"}))


@needs_local
@pytest.mark.parametrize("verl_schema", [True, False], ids=["verl-installed", "verl-absent"])
def test_every_verl_key_is_accepted_by_the_local_engine(monkeypatch: pytest.MonkeyPatch, verl_schema: bool) -> None:
    """Each key of ``engine_config.verl`` (changed as the walk above changes it) passes the local engine's check."""
    from vista_plugin_local import verl_section
    from vista_plugin_local.config import validate_engine_config

    if not verl_schema:
        monkeypatch.setattr(verl_section, "verl_schema", lambda: None)
    keys = [key for key in every_key() if key.startswith("engine_config.verl.")]
    assert len(keys) >= 10
    for key in keys:
        validate_engine_config(_run(_setting(key, CHANGES[key])))


@needs_local
def test_the_local_engines_copy_of_verls_keys_is_verls() -> None:
    """``vista_plugin_local.verl_section.KEYS`` (used where the verl plugin is not installed) is
    VerlEngineConfig's key tree."""
    from vista_plugin_local.verl_section import KEYS

    from vista_rl.config import section_keys

    assert section_keys(VerlEngineConfig) == KEYS
