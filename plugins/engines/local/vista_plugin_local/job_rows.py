"""The rows every learning job's table shares beyond its own models (issue 38): the teacher's
held-out success, SFT trained to its plateau (2x and 4x the configured steps), and the one summary
file ``scripts/demo.sh --seeds`` reads back.

Why here: the main job (``vista_plugin_local.main_job``), the tool job and the grounded job
(``scripts/demo_tools.py``, ``scripts/demo_grounded.py``) all need them, and each is engine-local
(they train and read ``RUN_DIR/models``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

import vista_rl
from vista_plugin_local.trainer import LocalEngine
from vista_rl.config import RunConfig, validate_config
from vista_rl.rollout import Estimate, RolloutEngine, episode_specs, proportion

#: The SFT lengths each table shows, as multiples of the configured ``sft.steps``.
SFT_MULTIPLES = (1, 2, 4)
SUMMARY_FILE = "job_summary.json"


def teacher_name(run: RunConfig) -> str:
    """The env config's ``teacher`` (the scripted policy SFT imitated); ``oracle`` when unset."""
    return str(run.env.config.get("teacher", "oracle"))


def teacher_success(run: RunConfig, seeds: Sequence[int]) -> Estimate:
    """The teacher's own success on ``seeds``: the env's ``oracle_response`` (what SFT data is made
    of, ``vista_plugin_local.sft_stage``) played through the core rollout engine with the run's env
    config and turn cap.  Deterministic, so its greedy and sampled rows are the same."""
    rollout = run.rollout.model_copy(update={"group_size": 1})
    with RolloutEngine(vista_rl.make_model("scripted", path="oracle"), rollout, seed=run.seed) as engine:
        trajectories = engine.run(episode_specs(run.env.id, list(seeds), 1, run.env.config))
    wins = sum(1 for trajectory in trajectories if trajectory.success and not trajectory.failure)
    return proportion(wins, len(trajectories))


def sft_model_dir(run_dir: Path, multiple: int) -> Path:
    """Where SFT at ``multiple`` x the configured steps is saved (1x: the run's own ``models/sft``)."""
    return run_dir / "models" / ("sft" if multiple == 1 else f"sft-{multiple}x")


def train_sft_multiples(run_dir: Path, multiples: Sequence[int] = (2, 4),
                        console: Console | None = None) -> dict[int, Path]:
    """SFT from the run's starting model for ``max(multiples)`` x its configured steps (same data, same
    order: the batch of a step depends on the step alone), saving the model at each multiple under
    ``RUN_DIR/models/sft-<k>x``.  Models already there are kept; returns multiple -> model dir."""
    run = validate_config(RunConfig, json_or_yaml(run_dir / "config.yaml"), str(run_dir / "config.yaml"))
    base = run.sft.steps
    wanted = {k: sft_model_dir(run_dir, k) for k in sorted(set(multiples)) if k > 1}
    if base == 0 or not wanted:
        return {}
    missing = {k: path for k, path in wanted.items() if not (path / "config.json").exists()}
    if not missing:
        return wanted
    data = run.model_dump()
    data["output_dir"] = str(run_dir / "sft-plateau")
    data["sft"]["steps"] = base * max(missing)
    data["trainer"].update(steps=0, checkpoint_every=0, eval_every=0)
    data["eval"].update(at_start=False, after_sft=False)
    plateau = validate_config(RunConfig, data, "SFT plateau config")
    at_step = {base * k: path for k, path in missing.items()}
    engine: LocalEngine

    def save(stage: str, step: int) -> None:
        if stage == "sft" and step in at_step:
            engine.policy.save_pretrained(at_step[step])

    engine = LocalEngine(plateau, console=console, step_hook=save)
    engine.run()
    return wanted


def json_or_yaml(path: Path) -> dict[str, Any]:
    """A run directory's ``config.yaml`` as a mapping."""
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a mapping")
    return data


def write_summary(run_dir: Path, job: str, run: RunConfig, rows: Mapping[str, Mapping[str, Estimate | None]],
                  verdict: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> Path:
    """``RUN_DIR/job_summary.json``: the table (row -> greedy/sampled estimates) and the verdict, the
    same shape for every job, so a multi-seed run prints one table (``scripts/demo_seeds.py``)."""
    summary = {"job": job, "env": run.env.id, "seed": run.seed, "teacher": teacher_name(run),
               "rows": {name: {mode: (est.to_dict() if est is not None else None) for mode, est in modes.items()}
                        for name, modes in rows.items()},
               "verdict": dict(verdict), **(dict(extra) if extra else {})}
    path = run_dir / SUMMARY_FILE
    path.write_text(json.dumps(summary, indent=2))
    return path
