"""The tool-use main job's evaluation harness and verdict (``bash scripts/demo_tools.sh`` runs it
after ``vista train examples/visual_search_tools.yaml``).

Why a second pass after training: the trainer scores untrained, SFT and RL *with* the tool (greedy).
What shows that the agent uses the tool is the same RL model with the tool taken away
(``env.config.tools=[]``: the tool leaves the env and its prompt) and the best policy that never zooms
(the best constant answer, chosen on training seeds).  Each of these runs through ``vista eval``'s
path (``run_eval``: the core rollout engine, a transformers backend, a run directory with
``trajectories.html``), so the viewer shows every tool turn with its zoomed image.

Verdict (issue 38, ``vista_plugin_local.verdict``): on sampled success, RL with the tool must beat the
teacher SFT imitated (``env.config.teacher``), SFT at 1x, 2x and 4x its configured steps, the best
constant answer and the tools-disabled RL model beyond both 95% CIs; the exit status is 1 otherwise.
The table and verdict also go to ``RUN_DIR/job_summary.json`` (``scripts/demo.sh --seeds``).

    python scripts/demo_tools.py RUN_DIR [--sampled/--no-sampled] [--plateau/--no-plateau] [--start EPOCH_S]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from vista_plugin_local.config import validate_engine_config
from vista_plugin_local.job_rows import (
    SFT_MULTIPLES,
    sft_model_dir,
    teacher_name,
    teacher_success,
    train_sft_multiples,
    write_summary,
)
from vista_plugin_local.verdict import Rival, RivalKind, estimate_of, job_verdict
from vista_plugin_visual_search.small import DOT_COLOURS

import vista_rl
from vista_rl.baselines import BlindBaseline, Verdict, bare_action, best_blind_baseline
from vista_rl.cli.eval import run_eval
from vista_rl.config import RunConfig, SeedRange, validate_config
from vista_rl.rollout import Estimate


@dataclass
class Row:
    label: str
    success: dict[str, float]
    tool_calls: float | None = None  # per episode
    where: str = ""

    def cell(self) -> str:
        s = self.success
        return f"{s['value']:.3f}  [{s['ci95_low']:.3f}, {s['ci95_high']:.3f}]"


def eval_config(run: RunConfig, out: Path, *, backend: str, path: str | None, tools: bool,
                temperature: float, model_config: dict[str, Any] | None = None) -> RunConfig:
    """The run's env and rollout settings on its held-out seeds, with the tool on or off."""
    engine = validate_engine_config(run)
    seeds = engine.eval.seeds
    env_config = dict(run.env.config)
    if not tools:
        env_config["tools"] = []
    data = run.model_dump()
    data.update(seed=seeds.start, output_dir=str(out),
                env={"id": run.env.id, "config": env_config},
                model={"backend": backend, "path": path, "config": model_config or {}})
    data["rollout"].update(episodes=seeds.count, group_size=1, batch_size=run.rollout.batch_size)
    data["rollout"]["sampling"]["temperature"] = temperature
    return validate_config(RunConfig, data, "demo eval config")


def evaluate(console: Console, label: str, config: RunConfig) -> Row:
    backend = vista_rl.make_model(config.model.backend, path=config.model.path, **config.model.config)
    started = time.perf_counter()
    try:
        summary = run_eval(config, backend, console)
    finally:
        backend.close()
    row = Row(label, summary["success_rate"], summary["tool_calls"] / max(summary["episodes"], 1),
              config.output_dir)
    console.print(f"eval [bold]{label}[/bold]: success {row.cell()}, {row.tool_calls:.2f} tool calls/episode "
                  f"({time.perf_counter() - started:.0f} s; viewer {config.output_dir}/trajectories.html)", soft_wrap=True)
    return row


def best_constant_answer(run: RunConfig, train: Sequence[int], heldout: Sequence[int]) -> BlindBaseline:
    """The best policy that never zooms: one fixed answer, chosen on training seeds and scored on the
    held-out ones (``vista_rl.baselines``, the main job's blind search with one-turn sequences).  This
    env's view is the same for every seed, so no policy without the tool does better in expectation."""
    env_config = {**run.env.config, "tools": []}
    answers = list(env_config.get("colours") or DOT_COLOURS)
    return best_blind_baseline(run.env.id, env_config, answers, 1, train, heldout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--sampled", action=argparse.BooleanOptionalAction, default=True,
                        help="score the models sampled (temperature 1) too; the verdict needs it")
    parser.add_argument("--plateau", action=argparse.BooleanOptionalAction, default=True,
                        help="train and score SFT at 2x and 4x its steps; the verdict needs it")
    parser.add_argument("--start", type=float, default=None, help="job start (epoch s) for the wall time line")
    args = parser.parse_args(argv)
    console = Console()
    run_dir: Path = args.run_dir
    run = validate_config(RunConfig, yaml.safe_load((run_dir / "config.yaml").read_text()), "run config")
    engine = validate_engine_config(run)
    results = json.loads((run_dir / "results.json").read_text())
    evals = results["evals"]
    final = run_dir / "models" / "final"
    out = run_dir / "demo_evals"
    greedy = engine.eval.temperature

    def score(label: str, name: str, model: Path, temperature: float, disabled: bool = False) -> Row:
        return evaluate(console, label, eval_config(run, out / name, backend="transformers", path=str(model),
                                                    tools=not disabled, temperature=temperature))

    rows: dict[str, Row] = {}
    for key, label in (("untrained", "untrained, tool"), ("sft", "SFT 1x, tool"), ("rl", "RL, tool")):
        if key in evals:
            rows[key] = Row(f"{label} (greedy)" if greedy == 0 else label, evals[key]["success"], where=str(run_dir))
    rows.update(teacher_and_sft_rows(console, run, run_dir, score, sampled=args.sampled, plateau=args.plateau))
    rows["rl_off"] = score("RL, tool disabled (greedy)", "rl-tool-disabled-greedy", final, 0.0, disabled=True)
    if args.sampled:
        rows["rl_sampled"] = score("RL, tool (sampled)", "rl-tool-sampled", final, 1.0)
        rows["rl_off_sampled"] = score("RL, tool disabled (sampled)", "rl-tool-disabled-sampled", final, 1.0,
                                       disabled=True)
    train, seeds = engine.trainer.train_seeds, engine.eval.seeds
    blind = best_constant_answer(run, range(train.start, train.start + min(train.count, 1000)), seeds.seeds())
    answer = bare_action(blind.actions[0])
    assert blind.heldout is not None
    console.print(f"best constant answer on {blind.train.n} training seeds: {answer} ({blind.train})")
    rows["blind"] = Row(f"best constant answer '{answer}', no tool", blind.heldout.to_dict(), tool_calls=0.0)
    # The viewer of the main result: the RL model with its tool, every zoom shown with its image.
    if not args.sampled:
        rows["rl_viewer"] = score("RL, tool (greedy, for the viewer)", "rl-tool-greedy", final, 0.0)

    print_table(console, run.env.id, seeds, rows)
    judged = print_verdict(console, rows, "rl_off_sampled")
    verdict = judged[0]
    viewer = rows.get("rl_sampled") or rows.get("rl_viewer")
    if viewer is not None:
        console.print(f"  tool turns with their zoomed images: {viewer.where}/trajectories.html "
                      f"(or `vista trajectories show {viewer.where}`)", highlight=False, soft_wrap=True)
    console.print(f"  run directory: {run_dir} (plot: {run_dir}/reward_success.png)", highlight=False,
                  soft_wrap=True)
    wall = time.time() - args.start if args.start is not None else None
    if wall is not None:
        console.print(f"wall time: {wall:.0f} s", highlight=False)
    beats = {check.name: check.passed for check in verdict.checks}
    save_summary(run_dir / "demo_tools.json", run.env.id, rows, beats, verdict.passed, answer)
    write_job_summary(run_dir, "tools", run, rows, judged, wall)
    return 0 if verdict.passed else 1


def teacher_and_sft_rows(console: Console, run: RunConfig, run_dir: Path, score: Callable[..., Row], *,
                         sampled: bool, plateau: bool) -> dict[str, Row]:
    """The rows issue 38 adds to both tool demos: the teacher SFT imitated (scripted, so greedy and
    sampled alike) and SFT at 1x (sampled; greedy is the trainer's), 2x and 4x its configured steps."""
    engine = validate_engine_config(run)
    started = time.perf_counter()
    teacher = teacher_success(run, engine.eval.seeds.seeds())
    console.print(f"teacher '{teacher_name(run)}' (scripted): held-out success {teacher} "
                  f"({time.perf_counter() - started:.0f} s)")
    rows = {"teacher": Row(f"teacher '{teacher_name(run)}' (scripted)", teacher.to_dict())}
    models = {1: sft_model_dir(run_dir, 1)}
    if plateau and run.sft.steps:
        started = time.perf_counter()
        models.update(train_sft_multiples(run_dir, [k for k in SFT_MULTIPLES if k > 1], console))
        console.print(f"SFT at {', '.join(f'{k}x' for k in SFT_MULTIPLES[1:])} of {run.sft.steps} steps: "
                      f"{time.perf_counter() - started:.0f} s")
    for multiple, model in models.items():
        if not (model / "config.json").exists():
            continue
        label = f"SFT {multiple}x ({multiple * run.sft.steps} steps)"
        if multiple > 1:
            rows[f"sft_{multiple}x"] = score(f"{label} (greedy)", f"sft-{multiple}x-greedy", model, 0.0)
        if sampled:
            key = "sft_sampled" if multiple == 1 else f"sft_{multiple}x_sampled"
            rows[key] = score(f"{label} (sampled)", f"sft-{multiple}x-sampled", model, 1.0)
    return rows


#: The verdict's rows (issue 38): RL sampled against these, each (kind, row key).
SAMPLED_RIVALS: tuple[tuple[RivalKind, str], ...] = (
    ("teacher", "teacher"), ("sft", "sft_sampled"), ("sft", "sft_2x_sampled"), ("sft", "sft_4x_sampled"),
    ("blind", "blind"))


def print_table(console: Console, env_id: str, seeds: SeedRange, rows: dict[str, Row]) -> None:
    """The held-out table both tool demos print (this one and scripts/demo_grounded.py)."""
    console.print(f"\nheld-out success on {env_id} ({seeds.count} seeds from {seeds.start}, never trained "
                  "on), 95% CIs:", soft_wrap=True)
    width = max(len(row.label) for row in rows.values())
    for row in rows.values():
        calls = f"   {row.tool_calls:.2f} zooms/episode" if row.tool_calls is not None else ""
        console.print(f"  {row.label:<{width}}  {row.cell()}{calls}", highlight=False, soft_wrap=True)


def print_verdict(console: Console, rows: dict[str, Row], ablation: str) -> tuple[Verdict, Estimate | None,
                                                                                list[Rival]]:
    """The verdict both tool demos print (``vista_plugin_local.verdict.job_verdict``): RL sampled
    (row ``rl_sampled``) beyond both CIs of the teacher, every sampled SFT row, the blind row and the
    ablation row ``ablation``; a missing row fails.  Returns the verdict, RL's estimate and the rivals."""
    def estimate(key: str) -> Estimate | None:
        return estimate_of(rows[key].success) if key in rows else None

    rivals = [Rival(kind, rows[key].label if key in rows else key, estimate(key))
              for kind, key in (*SAMPLED_RIVALS, ("ablation", ablation))]
    rl = estimate("rl_sampled")
    verdict = job_verdict(rl, rivals)
    console.print("verdict on sampled success: RL must beat the teacher, SFT at 1x/2x/4x steps, the best constant "
                  "answer and the ablation beyond both 95% CIs", highlight=False, soft_wrap=True)
    console.print(verdict.line(), highlight=False, soft_wrap=True)
    return verdict, rl, rivals


def write_job_summary(run_dir: Path, job: str, run: RunConfig, rows: dict[str, Row],
                      judged: tuple[Verdict, Estimate | None, list[Rival]], wall: float | None) -> None:
    """The shared ``job_summary.json`` (``scripts/demo.sh --seeds`` prints one table from them)."""
    verdict, rl, rivals = judged
    table = {row.label: {"sampled" if "(sampled)" in row.label else "greedy": estimate_of(row.success)}
             for row in rows.values()}
    judged_rows = {"RL": rl.to_dict() if rl else None,
                   **{f"{rival.kind}: {rival.name}": rival.estimate.to_dict() if rival.estimate else None
                      for rival in rivals}}
    write_summary(run_dir, job, run, table, verdict.to_dict(), {"wall_s": wall, "judged": judged_rows})


def save_summary(path: Path, env_id: str, rows: dict[str, Row], beats: dict[str, bool], passed: bool,
                 answer: str) -> None:
    """The demo's rows and verdict as JSON beside the run."""
    summary = {"env": env_id, "rows": {key: vars(row) for key, row in rows.items()}, "beats": beats,
               "verdict": passed, "best_constant_answer": answer}
    path.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    sys.exit(main())
