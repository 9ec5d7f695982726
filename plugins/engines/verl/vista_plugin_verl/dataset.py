"""verl parquet rows for env training: one row per (env, seed); the env makes all content at run time.

Columns follow verl's ``RLHFDataset``: ``prompt`` (a placeholder chat, since the agent loop builds
the real prompt from the env's reset), ``data_source``, ``agent_name`` (selects the vista agent loop),
``reward_model`` and ``extra_info`` with ``env_id``, ``env_config`` (JSON text: configs differ per env
and parquet wants one schema), ``seed``, ``rollout``, ``split`` and ``index``.

``rollout`` is the run's whole validated :class:`~vista_rl.config.RolloutSection`, serialised once
(JSON text) and validated back by the agent loop (:func:`rollout_from_row`): it is the one carrier of
every rollout setting (``max_turns``, the context window, sampling, timeouts, tools), so the
episode driver gets on verl exactly what ``RolloutEngine`` gets locally and no setting has a second
copy or a fallback.  Train and validation seeds come from separate ranges and are checked to be
disjoint (VAGEN's legacy builder drew both from the same prefix).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vista_plugin_verl.agent_loop_name import AGENT_NAME
from vista_rl.config import RolloutSection, RunConfig, format_validation_error

#: The ``extra_info`` key of the row's rollout settings (a ``RolloutSection`` as JSON text).
ROLLOUT_KEY = "rollout"


class SeedOverlapError(ValueError):
    """Train and validation seeds overlap."""


class RowError(ValueError):
    """A dataset row without valid rollout settings (written by another tool or an older vista)."""


def rollout_text(rollout: RolloutSection | Mapping[str, Any]) -> str:
    """``rollout`` validated and serialised once, as the rows carry it (a mapping is validated here, so
    a bad key fails when the rows are written, not in a verl worker)."""
    if isinstance(rollout, RolloutSection):
        return rollout.model_dump_json()
    try:
        return RolloutSection.model_validate(dict(rollout)).model_dump_json()
    except ValidationError as exc:
        raise RowError(format_validation_error(exc, "rollout section", prefix="rollout")) from None


def rollout_from_row(extra_info: Mapping[str, Any]) -> RolloutSection:
    """The run's rollout settings a row carries, validated back (the agent loop's only source of them)."""
    raw = extra_info.get(ROLLOUT_KEY)
    if not isinstance(raw, str) or not raw:
        raise RowError(f"dataset row: extra_info.{ROLLOUT_KEY} is missing (it holds the run's rollout section); "
                       "write the rows with vista_plugin_verl.dataset.env_rows or `vista train --engine verl`")
    try:
        return RolloutSection.model_validate_json(raw)
    except ValidationError as exc:
        raise RowError(format_validation_error(exc, "dataset row", prefix=f"extra_info.{ROLLOUT_KEY}")) from None


def env_rows(env_id: str, env_config: dict[str, Any], seeds: Sequence[int], split: str,
             rollout: RolloutSection | Mapping[str, Any], *, agent_name: str = AGENT_NAME) -> list[dict[str, Any]]:
    """One row per seed; every row carries ``rollout`` (see the module doc)."""
    config_text = json.dumps(env_config, sort_keys=True)
    settings = rollout_text(rollout)
    return [
        {
            "data_source": env_id,
            "prompt": [{"role": "user", "content": f"[{env_id} seed {seed}: the env writes the prompt]"}],
            "agent_name": agent_name,
            "ability": "agent",
            "reward_model": {"style": "env", "ground_truth": ""},
            "extra_info": {"env_id": env_id, "env_config": config_text, "seed": int(seed),
                           ROLLOUT_KEY: settings, "split": split, "index": index},
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
    return {split: env_rows(run.env.id, run.env.config, seeds, split, run.rollout)
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
                       val_seeds: Sequence[int],
                       rollout: RolloutSection | Mapping[str, Any] | None = None) -> tuple[Path, Path]:
    """Write ``train.parquet`` and ``val.parquet`` (``rollout``: the run's section, default the
    defaults); raises if the seed sets overlap."""
    _check_disjoint(train_seeds, val_seeds)
    settings = rollout if rollout is not None else RolloutSection()
    return write_rows(out_dir, {split: env_rows(env_id, env_config, seeds, split, settings)
                                for split, seeds in (("train", train_seeds), ("val", val_seeds))})
