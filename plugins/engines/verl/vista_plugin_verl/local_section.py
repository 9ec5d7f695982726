"""``engine_config.local`` on the verl engine: checked key by key, mapped or refused, never skipped.

The local engine's section holds what only that engine has, but a user moving a laptop config to a
cluster expects LoRA to stay LoRA and a misspelt key to be an error on both engines.  So the verl
engine reads the section too: LoRA and precision map onto verl's keys, settings verl cannot honour
are refused by name (see ``coverage.REFUSED``), the local update's memory-layout switches come back as
warnings, and a key the local engine does not have is an error naming it.

The schema is the local engine's own (``vista_plugin_local.config.LocalSection``) where that plugin is
installed; a cluster venv usually has only this plugin, so :data:`DEFAULTS` lists the section's keys
and defaults here as well (``tests/test_verl_coverage.py`` checks the two agree).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from vista_rl.config import RunConfig, check_section_keys, engine_section

PREFIX = "engine_config.local"
#: ``engine_config.local``'s keys and defaults (``lora`` nested), as ``LocalSection`` declares them.
DEFAULTS: dict[str, Any] = {
    "device": "auto",
    "precision": "auto",
    "image_size": None,
    "max_nan_steps": 3,
    "value_coef": 0.5,
    "lora": {"enabled": False, "r": 8, "alpha": 16, "dropout": 0.0,
             "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]},
    "packing": True,
    "shared_prefix": None,
    "static_decode": "auto",
}
#: verl's devices: Ray places each worker on its own GPU(s) of the cluster.
GPU_DEVICES = ("auto", "cuda")
#: Our precision -> (FSDP param dtype, vLLM/SGLang dtype); ``auto`` and ``bf16`` are verl's defaults
#: (``verl/workers/engine/fsdp/transformer_impl.py:396-399``, ``rollout.dtype: bfloat16``).
PRECISIONS = {"fp32": ("fp32", "float32"), "fp16": ("fp16", "float16")}
#: How verl trains LoRA (``actor_rollout_ref.model.lora_rank > 0``; its ``LoraConfig`` is built without
#: a dropout, ``verl/workers/engine/fsdp/transformer_impl.py:358-366``).
LORA_FILE = "verl/workers/engine/fsdp/transformer_impl.py:358-366"


def raw_section(run: RunConfig) -> dict[str, Any]:
    """``engine_config.local`` as written, with defaults filled in; unknown keys are errors naming the
    full key, checked with the local engine's own schema where it is installed."""
    data = dict(run.engine_config.get("local") or {})
    if importlib.util.find_spec("vista_plugin_local") is not None:
        from vista_plugin_local.config import LocalSection

        return engine_section(run, "local", LocalSection).model_dump()
    check_section_keys(data, {key: dict.fromkeys(value) if isinstance(value, dict) else None
                              for key, value in DEFAULTS.items()}, PREFIX, "the local engine's section")
    merged = {**DEFAULTS, **data}
    merged["lora"] = {**DEFAULTS["lora"], **dict(data.get("lora") or {})}
    return merged


def refusals(section: dict[str, Any], uses_critic: bool, image_size: int | None = None) -> list[str]:
    """What verl cannot train as the local engine would, one message per key.  ``image_size`` is the
    run's ``rollout.image_size``, which the old ``image_size`` key here sets (``RunConfig``)."""
    out = []
    device = str(section["device"])
    if device not in GPU_DEVICES:
        out.append(f"{PREFIX}.device: {device}: verl places its workers on the cluster's GPUs "
                   "(engine_config.verl.cluster); set auto or cuda, and pick GPUs with CUDA_VISIBLE_DEVICES "
                   "(a CPU check of a verl install is scripts/verl_cpu_step/run.sh)")
    if section["image_size"] and section["image_size"] != image_size:
        out.append(f"{PREFIX}.image_size: {section['image_size']} is not rollout.image_size ({image_size}); the "
                   "episode driver resizes observations for both engines at rollout.image_size: set that instead")
    if section["max_nan_steps"] != DEFAULTS["max_nan_steps"]:
        out.append(f"{PREFIX}.max_nan_steps: verl does not skip non-finite steps; remove it")
    if uses_critic and section["value_coef"] != DEFAULTS["value_coef"]:
        out.append(f"{PREFIX}.value_coef: the local value head shares the policy's body and loss; verl's critic "
                   "is its own model with its own optimizer (engine_config.verl.critic_lr); remove it")
    lora = section["lora"]
    if lora["enabled"] and lora["dropout"]:
        out.append(f"{PREFIX}.lora.dropout: verl builds its LoRA adapters without dropout ({LORA_FILE}); "
                   "set it to 0.0")
    return out


def warnings(section: dict[str, Any]) -> list[str]:
    """Local memory-layout and sampling-cache switches that change nothing verl trains, named when set."""
    from vista_plugin_verl.coverage import NOT_TRAINED

    out = []
    for key in ("packing", "shared_prefix", "static_decode"):
        if section.get(key, DEFAULTS[key]) != DEFAULTS[key]:
            out.append(f"{PREFIX}.{key}: not used by verl ({NOT_TRAINED[f'{PREFIX}.{key}']})")
    return out


def overrides(section: dict[str, Any], critic: bool) -> list[str]:
    """LoRA and precision as verl's keys, for the actor (and the critic, a model of its own)."""
    models = ["actor_rollout_ref.model", *(["critic.model"] if critic else [])]
    out: list[str] = []
    lora = section["lora"]
    if lora["enabled"]:
        modules = "[" + ",".join(str(name) for name in lora["target_modules"]) + "]"
        for model in models:
            out += [f"{model}.lora_rank={int(lora['r'])}", f"{model}.lora_alpha={int(lora['alpha'])}",
                    f"{model}.target_modules={modules}"]
    dtypes = PRECISIONS.get(str(section["precision"]))
    if dtypes:
        param, rollout = dtypes
        engines = ["actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.ref.fsdp_config",
                   *(["critic.fsdp"] if critic else [])]
        out += [f"+{engine}.mixed_precision.param_dtype={param}" for engine in engines]
        out.append(f"actor_rollout_ref.rollout.dtype={rollout}")
    return out
