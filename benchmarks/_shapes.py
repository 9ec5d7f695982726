"""Model shapes the training and rollout benchmarks run at: the tiny test model, and a random
Qwen2.5-VL with Qwen2.5-0.5B's text shape (issue 25's GPU figures).

Why here: ``train.py`` and ``rollout.py`` must build the same model for the same ``--shape``, so a
figure from one can be read beside the other.  Both are random inits through
``vista_rl_sdk.tiny_models.init_tiny_model`` (the real ``Qwen2_5_VLForConditionalGeneration``, the
offline tokenizer and processors); no weights are downloaded.  Not a benchmark itself (the leading
underscore keeps it out of ``tests/test_benchmarks_run.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: --shape -> (text overrides, vision overrides) of ``tiny_qwen2_5_vl_config``.  qwen2.5-0.5b is
#: Qwen2.5-0.5B's text stack (896 hidden, 4864 intermediate, 24 layers, 14 heads, 2 KV heads: head
#: dim 64, so M-RoPE sections of 8+12+12 = 32 rotary pairs) with the tiny vision tower projecting to
#: 896.  The vocabulary is the offline tokenizer's (1,024 tokens), so the parameter count is the
#: transformer's, ~359 M.
SHAPES: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]] = {
    "tiny": (None, None),
    "qwen2.5-0.5b": (
        {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
         "num_key_value_heads": 2, "max_position_embeddings": 32768,
         "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [8, 12, 12]}},
        {"out_hidden_size": 896},
    ),
}


def make_model(shape: str, out_dir: Path, seed: int = 0) -> Path:
    """Write the random model of ``shape`` to ``out_dir`` and return it.

    With ``VISTA_BENCH_MODELS=DIR`` the model is kept in ``DIR/<shape>-seed<seed>`` and reused by the
    next script (the 0.5B shape takes a while to initialise and save; the GPU suite sets it)."""
    import os

    from vista_rl_sdk.tiny_models import init_tiny_model

    if shape not in SHAPES:
        raise SystemExit(f"unknown --shape {shape!r}; choose one of {', '.join(SHAPES)}")
    if os.environ.get("VISTA_BENCH_MODELS"):
        out_dir = Path(os.environ["VISTA_BENCH_MODELS"]) / f"{shape}-seed{seed}"
        if (out_dir / "vista_tiny_model.json").exists():
            return out_dir
    text, vision = SHAPES[shape]
    return init_tiny_model(out_dir, seed=seed, text=text, vision=vision)


def parameter_count(model_dir: Path) -> int | None:
    """The parameter count the tiny-model recipe recorded (None when absent)."""
    import json

    recipe = model_dir / "vista_tiny_model.json"
    return json.loads(recipe.read_text()).get("parameters") if recipe.exists() else None
