"""Built-in VLM families of the local engine: Qwen2-VL / Qwen2.5-VL and InternVL."""

from __future__ import annotations

from vista_rl.hookspecs import RegisterModelFamily, hookimpl


@hookimpl
def register_model_families(register: RegisterModelFamily) -> None:
    register("qwen2-vl", "vista_rl.engine.families:QwenVLFamily",
             description="Qwen2-VL / Qwen2.5-VL: <|image_pad|> tokens, patch grids, M-RoPE")
    register("internvl", "vista_rl.engine.families:InternVLFamily",
             description="InternVL (transformers-native): <img><IMG_CONTEXT>...</img> tiles, 1-D RoPE")
