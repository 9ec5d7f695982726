"""Small run configs for the local-engine tests: the tiny real Qwen2.5-VL, real envs, 1-2 steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vista_rl.config import RunConfig, apply_overrides, validate_config

ODDSHAPE = {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 28, "prompt_format": "no_think"}}
FROZENLAKE = {"id": "frozenlake/frozenlake-v0",
              "config": {"prompt_format": "no_think", "max_actions_per_step": 1, "tile_size": 28,
                         "format_reward": 0.0, "success_reward": 1.0, "min_solution_steps": 2,
                         "max_solution_steps": 3}}


def run_config(model_dir: Path, out: Path, env: dict[str, Any] | None = None, max_turns: int = 1,
               overrides: tuple[str, ...] = ()) -> RunConfig:
    data: dict[str, Any] = {
        "seed": 3,
        "output_dir": str(out),
        "env": env or ODDSHAPE,
        "model": {"path": str(model_dir)},
        "rollout": {"max_turns": max_turns, "group_size": 2, "batch_size": 4,
                    "sampling": {"temperature": 1.0, "max_tokens": 5}},
        "trainer": {"steps": 2, "seeds_per_step": 2, "lr": 1e-3, "micro_batch_size": 2,
                    "train_seeds": {"start": 0, "count": 50}},
        "sft": {"steps": 2, "batch_size": 2, "seeds": {"start": 500, "count": 4}},
        "eval": {"seeds": {"start": 1000, "count": 2}, "at_start": False},
    }
    return validate_config(RunConfig, apply_overrides(data, overrides))
