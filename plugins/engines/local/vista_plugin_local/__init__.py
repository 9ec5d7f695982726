"""The ``local`` training engine: SFT, GRPO and PPO (value head) on one device with transformers models,
and the VLM families it knows (Qwen2-VL / Qwen2.5-VL, InternVL).

A plugin of its own (``vista-plugin-local``), as verl's engine is, so that the core needs no torch:
``pip install vista-rl`` gives the contracts, rollout, estimators, store and CLI; this distribution
adds torch, transformers and peft.  Heavy imports happen only when the engine or a family is made,
so loading the plugin (``vista engines``, ``vista --help``) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vista_rl.hookspecs import RegisterEngine, RegisterLogger, RegisterModelFamily, hookimpl

if TYPE_CHECKING:
    from vista_plugin_local.trainer import LocalEngine

__all__ = ["LocalEngine", "register_engines", "register_loggers", "register_model_families"]


@hookimpl
def register_engines(register: RegisterEngine) -> None:
    register("local", "vista_plugin_local.trainer:LocalEngine",
             description="One process, one device (CPU or CUDA): SFT, GRPO and PPO with a value head")


@hookimpl
def register_model_families(register: RegisterModelFamily) -> None:
    register("qwen2-vl", "vista_plugin_local.families:QwenVLFamily",
             description="Qwen2-VL / Qwen2.5-VL: <|image_pad|> tokens, patch grids, M-RoPE")
    register("internvl", "vista_plugin_local.families:InternVLFamily",
             description="InternVL (transformers-native): <img><IMG_CONTEXT>...</img> tiles, 1-D RoPE")


@hookimpl
def register_loggers(register: RegisterLogger) -> None:
    register("jsonl", "vista_plugin_local.metrics:JsonlLogger",
             description="the run's record: metrics.jsonl per step, eval.jsonl per held-out evaluation")
    register("tensorboard", "vista_plugin_local.metrics:TensorBoardLogger",
             description="scalars to RUN_DIR/tensorboard (needs the tensorboard package)")


def __getattr__(name: str) -> Any:
    if name == "LocalEngine":
        from vista_plugin_local.trainer import LocalEngine

        return LocalEngine
    raise AttributeError(name)
