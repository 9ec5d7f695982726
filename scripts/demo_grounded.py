"""The grounded-reasoning job's evaluation harness and verdict (``bash scripts/demo_grounded.sh`` runs
it after ``vista train examples/grounded_zoom.yaml``).

Why a second pass after training: the trainer scores SFT and RL greedy with the zoom.  What shows
that the agent's grounded zoom matters is the same RL model with the zoom *disabled*:
``search_coordinate`` with ``disabled: true`` (through ``rollout.tools``) refuses every call with a
text and no image, while the env, its prompt and the model's (x, y) stay as they were.  The blind row
is the best constant answer (chosen on training seeds), the best any policy without the zoom can do
in expectation on this task.  Each eval runs through ``vista eval``'s path (``run_eval``), so each
has a ``trajectories.html`` with the zoomed crops.

Verdict (issue 38, ``vista_plugin_local.verdict``): on sampled success RL must beat the teacher SFT
imitated (``env.config.teacher``), SFT at 1x, 2x and 4x its configured steps, the best constant answer
and the zoom-disabled RL model beyond both 95% CIs; the exit status is 1 otherwise.

    python scripts/demo_grounded.py RUN_DIR [--sampled/--no-sampled] [--plateau/--no-plateau] [--start EPOCH_S]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from demo_tools import (  # scripts/ is sys.path[0]: the tool job's harness
    Row,
    eval_config,
    evaluate,
    print_table,
    print_verdict,
    save_summary,
    teacher_and_sft_rows,
    write_job_summary,
)
from rich.console import Console
from vista_plugin_local.config import validate_engine_config

from vista_rl.baselines import bare_action, best_blind_baseline
from vista_rl.config import RunConfig, validate_config

ZOOM = "search_coordinate"


def zoom_disabled(config: RunConfig) -> RunConfig:
    """The same eval with the zoom tool made to refuse (``disabled: true``), its other settings kept."""
    data = config.model_dump()
    tools: dict[str, Any] = data["rollout"].setdefault("tools", {})
    entry = tools.get(ZOOM) or {"use": None, "config": {}}
    tools[ZOOM] = {**entry, "config": {**(entry.get("config") or {}), "disabled": True}}
    return validate_config(RunConfig, data, "zoom-disabled eval config")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--sampled", action=argparse.BooleanOptionalAction, default=True,
                        help="also score SFT and RL sampled (temperature 1), RL with and without the zoom; "
                        "the verdict needs it")
    parser.add_argument("--plateau", action=argparse.BooleanOptionalAction, default=True,
                        help="train and score SFT at 2x and 4x its steps; the verdict needs it")
    parser.add_argument("--start", type=float, default=None, help="job start (epoch s) for the wall time line")
    args = parser.parse_args(argv)
    console = Console()
    run_dir: Path = args.run_dir
    run = validate_config(RunConfig, yaml.safe_load((run_dir / "config.yaml").read_text()), "run config")
    engine = validate_engine_config(run)
    evals = json.loads((run_dir / "results.json").read_text())["evals"]
    models, out = run_dir / "models", run_dir / "demo_evals"
    suffix = " (greedy)" if engine.eval.temperature == 0 else ""

    def score(label: str, name: str, model: Path, temperature: float, disabled: bool = False) -> Row:
        config = eval_config(run, out / name, backend="transformers", path=str(model), tools=True,
                             temperature=temperature)
        return evaluate(console, label, zoom_disabled(config) if disabled else config)

    final = models / "final"
    rows: dict[str, Row] = {}
    for key, label in (("untrained", "untrained, zoom"), ("sft", "SFT 1x, zoom"), ("rl", "RL, zoom")):
        if key in evals:
            rows[key] = Row(label + suffix, evals[key]["success"], where=str(run_dir))
    rows.update(teacher_and_sft_rows(console, run, run_dir, score, sampled=args.sampled, plateau=args.plateau))
    rows["rl_off"] = score("RL, zoom disabled (greedy)", "rl-zoom-disabled-greedy", final, 0.0, disabled=True)
    if args.sampled:
        rows["rl_sampled"] = score("RL, zoom (sampled)", "rl-sampled", final, 1.0)
        rows["rl_off_sampled"] = score("RL, zoom disabled (sampled)", "rl-zoom-disabled-sampled", final, 1.0,
                                       disabled=True)
    train, seeds = engine.trainer.train_seeds, engine.eval.seeds
    env_config = {**run.env.config, "tools": [], "prompt_format": "no_think"}
    colours = list(env_config.get("colours") or ("red", "green", "blue", "orange"))
    blind = best_blind_baseline(run.env.id, env_config, colours, 1,
                                range(train.start, train.start + min(train.count, 1000)), seeds.seeds())
    answer = bare_action(blind.actions[0])
    assert blind.heldout is not None
    console.print(f"best constant answer on {blind.train.n} training seeds: {answer} ({blind.train})")
    rows["blind"] = Row(f"best constant answer '{answer}', no zoom", blind.heldout.to_dict(), tool_calls=0.0)

    print_table(console, run.env.id, seeds, rows)
    judged = print_verdict(console, rows, "rl_off_sampled")
    passed = judged[0].passed
    beats = {check.name: check.passed for check in judged[0].checks}
    console.print(f"verdict: {'PASS' if passed else 'FAIL'}", highlight=False)
    viewer = rows.get("rl_sampled") or rows["rl_off"]
    console.print(f"  zoom turns with their crops: {viewer.where}/trajectories.html; run directory: {run_dir}",
                  highlight=False, soft_wrap=True)
    wall = time.time() - args.start if args.start is not None else None
    if wall is not None:
        console.print(f"wall time: {wall:.0f} s", highlight=False)
    save_summary(run_dir / "demo_grounded.json", run.env.id, rows, beats, passed, answer)
    write_job_summary(run_dir, "grounded", run, rows, judged, wall)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
