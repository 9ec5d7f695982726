"""verl parquet rows for env training: one row per (env, seed); the env makes all content at run time.

Columns follow verl's ``RLHFDataset``: ``prompt`` (a placeholder chat, since the agent loop builds
the real prompt from the env's reset), ``data_source``, ``agent_name`` (selects the vista agent loop),
``reward_model`` and ``extra_info`` with ``env_id``, ``env_config`` (JSON text: configs differ per env
and parquet wants one schema), ``seed``, ``max_turns``, ``rollout`` (JSON text of the run's
rollout keys in :data:`TURN_KEYS`, which the agent loop's episode driver applies as ``RolloutEngine``
does), ``split`` and ``index``.  Train and validation seeds come from separate
ranges and are checked to be disjoint (VAGEN's legacy builder drew both from the same prefix).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vista_plugin_verl.agent_loop_name import AGENT_NAME
from vista_rl.config import RunConfig

#: The rollout keys the agent loop's EpisodeDriver reads, as RolloutEngine reads them: reflection, the
#: tool-result role, the tool schemas in the system prompt (describe_tools), rollout.tools (how the
#: worker makes the env's tools), the env/tool timeouts, the token budget, the context-window keys
#: (window_size, sequences: per-turn rows), the sampling (each reply's max_tokens and stop) and the
#: size the model sees images at (image_size).
TURN_KEYS = ("reflection", "reflection_attempts", "tool_response_role", "describe_tools", "tools",
             "env_timeout_s", "tool_timeout_s", "max_context_tokens", "window_size", "sequences", "sampling",
             "image_size")


class SeedOverlapError(ValueError):
    """Train and validation seeds overlap."""


def env_rows(env_id: str, env_config: dict[str, Any], seeds: Sequence[int], split: str,
             max_turns: int, agent_name: str = AGENT_NAME,
             rollout: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    config_text = json.dumps(env_config, sort_keys=True)
    rollout_text = json.dumps({key: value for key, value in (rollout or {}).items() if key in TURN_KEYS},
                              sort_keys=True)
    return [
        {
            "data_source": env_id,
            "prompt": [{"role": "user", "content": f"[{env_id} seed {seed}: the env writes the prompt]"}],
            "agent_name": agent_name,
            "ability": "agent",
            "reward_model": {"style": "env", "ground_truth": ""},
            "extra_info": {"env_id": env_id, "env_config": config_text, "seed": int(seed),
                           "max_turns": int(max_turns), "rollout": rollout_text, "split": split,
                           "index": index},
        }
        for index, seed in enumerate(seeds)
    ]


def run_rows(run: RunConfig) -> dict[str, list[dict[str, Any]]]:
    """The train and val rows of a run config: everything of the config the agent loop reads travels in
    them.  The train rows are each RL step's seeds in step order, drawn from ``trainer.train_seeds`` as
    the local engine draws them (:func:`vista_rl.step_seeds.step_seeds`; verl reads them unshuffled, one
    step's ``trainer.seeds_per_step`` rows a batch), the val rows ``eval.seeds``.  Raises if they overlap."""
    from vista_rl.step_seeds import run_step_seeds

    train, val = run_step_seeds(run), run.eval.seeds.seeds()
    _check_disjoint(train, val)
    rollout = run.rollout.model_dump()
    return {split: env_rows(run.env.id, run.env.config, seeds, split, run.rollout.max_turns, rollout=rollout)
            for split, seeds in (("train", train), ("val", val))}


def write_rows(out_dir: str | Path, rows: Mapping[str, list[dict[str, Any]]]) -> tuple[Path, Path]:
    """Write ``train.parquet`` and ``val.parquet`` from :func:`run_rows`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for split in ("train", "val"):
        path = out / f"{split}.parquet"
        pq.write_table(pa.Table.from_pylist(list(rows[split])), path)
        paths.append(path)
    return paths[0], paths[1]


def _check_disjoint(train_seeds: Sequence[int], val_seeds: Sequence[int]) -> None:
    overlap = sorted(set(train_seeds) & set(val_seeds))
    if overlap:
        raise SeedOverlapError(f"train and validation seeds overlap ({len(overlap)} seeds, e.g. {overlap[:5]}); "
                               "pick disjoint ranges")


def write_env_datasets(out_dir: str | Path, env_id: str, env_config: dict[str, Any], train_seeds: Sequence[int],
                       val_seeds: Sequence[int], max_turns: int,
                       rollout: Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """Write ``train.parquet`` and ``val.parquet``; raises if the seed sets overlap."""
    _check_disjoint(train_seeds, val_seeds)
    return write_rows(out_dir, {split: env_rows(env_id, env_config, seeds, split, max_turns, rollout=rollout)
                                for split, seeds in (("train", train_seeds), ("val", val_seeds))})
