"""The tool-use main job's evaluation harness and verdict (``bash scripts/demo_tools.sh`` runs it
after ``vista train examples/visual_search_tools.yaml``).

Why a second pass after training: the trainer scores untrained, SFT and RL *with* the tool (greedy).
What shows that the agent uses the tool is the same RL model with the tool taken away
(``env.config.tools=[]``: the tool leaves the env and its prompt) and the best policy that never zooms
(the best constant answer, chosen on training seeds).  Each of these runs through ``vista eval``'s
path (``run_eval``: the core rollout engine, a transformers backend, a run directory with
``trajectories.html``), so the viewer shows every tool turn with its zoomed image.

Verdict: RL with the tool (greedy) must beat SFT, the tools-disabled RL model and the best constant
answer beyond both 95% CIs; the exit status is 1 otherwise.

    python scripts/demo_tools.py RUN_DIR [--sampled/--no-sampled] [--start EPOCH_SECONDS]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from vista_plugin_local.config import validate_engine_config
from vista_plugin_visual_search.small import DOT_COLOURS

import vista_rl
from vista_rl.baselines import BlindBaseline, bare_action, best_blind_baseline
from vista_rl.cli.eval import run_eval
from vista_rl.config import RunConfig, SeedRange, validate_config


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
                        help="also score the RL model sampled (temperature 1), with and without the tool")
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

    rows: dict[str, Row] = {}
    for key, label in (("untrained", "untrained, tool"), ("sft", "SFT, tool"), ("rl", "RL, tool")):
        if key in evals:
            rows[key] = Row(f"{label} (greedy)" if greedy == 0 else label, evals[key]["success"], where=str(run_dir))
    rows["rl_off"] = evaluate(console, "RL, tool disabled (greedy)", eval_config(
        run, out / "rl-tool-disabled-greedy", backend="transformers", path=str(final), tools=False, temperature=0.0))
    if args.sampled:
        rows["rl_sampled"] = evaluate(console, "RL, tool (sampled)", eval_config(
            run, out / "rl-tool-sampled", backend="transformers", path=str(final), tools=True, temperature=1.0))
        rows["rl_off_sampled"] = evaluate(console, "RL, tool disabled (sampled)", eval_config(
            run, out / "rl-tool-disabled-sampled", backend="transformers", path=str(final), tools=False,
            temperature=1.0))
    train, seeds = engine.trainer.train_seeds, engine.eval.seeds
    blind = best_constant_answer(run, range(train.start, train.start + min(train.count, 1000)), seeds.seeds())
    answer = bare_action(blind.actions[0])
    assert blind.heldout is not None
    console.print(f"best constant answer on {blind.train.n} training seeds: {answer} ({blind.train})")
    rows["blind"] = Row(f"best constant answer '{answer}', no tool", blind.heldout.to_dict(), tool_calls=0.0)
    # The viewer of the main result: the RL model with its tool, every zoom shown with its image.
    if not args.sampled:
        rows["rl_viewer"] = evaluate(console, "RL, tool (greedy, for the viewer)", eval_config(
            run, out / "rl-tool-greedy", backend="transformers", path=str(final), tools=True, temperature=0.0))

    print_table(console, run.env.id, seeds, rows)
    beats, passed = print_verdict(console, "RL with the tool", rows, {
        "SFT": "sft", "the tools-disabled RL model": "rl_off", "the best constant answer": "blind"})
    viewer = rows.get("rl_sampled") or rows.get("rl_viewer")
    if viewer is not None:
        console.print(f"  tool turns with their zoomed images: {viewer.where}/trajectories.html "
                      f"(or `vista trajectories show {viewer.where}`)", highlight=False, soft_wrap=True)
    console.print(f"  run directory: {run_dir} (plot: {run_dir}/reward_success.png)", highlight=False,
                  soft_wrap=True)
    if args.start is not None:
        console.print(f"wall time: {time.time() - args.start:.0f} s", highlight=False)
    save_summary(run_dir / "demo_tools.json", run.env.id, rows, beats, passed, answer)
    return 0 if passed else 1


def print_table(console: Console, env_id: str, seeds: SeedRange, rows: dict[str, Row]) -> None:
    """The held-out table both tool demos print (this one and scripts/demo_grounded.py)."""
    console.print(f"\nheld-out success on {env_id} ({seeds.count} seeds from {seeds.start}, never trained "
                  "on), 95% CIs:", soft_wrap=True)
    width = max(len(row.label) for row in rows.values())
    for row in rows.values():
        calls = f"   {row.tool_calls:.2f} zooms/episode" if row.tool_calls is not None else ""
        console.print(f"  {row.label:<{width}}  {row.cell()}{calls}", highlight=False, soft_wrap=True)


def print_verdict(console: Console, claim: str, rows: dict[str, Row],
                  rivals: dict[str, str]) -> tuple[dict[str, bool], bool]:
    """The verdict both tool demos print: whether RL's (row ``rl``) lower CI bound is above each
    rival's upper one; ``rivals`` maps a rival's name to its row key (a missing row never passes)."""
    rl = rows.get("rl")
    beats = {name: rl is not None and key in rows and rl.success["ci95_low"] > rows[key].success["ci95_high"]
             for name, key in rivals.items()}
    passed = all(beats.values())
    console.print(f"{claim} beats {', '.join(rivals)} beyond both 95% CIs: {'yes' if passed else 'no'}"
                  + ("" if passed else f" (not beyond: {', '.join(name for name, ok in beats.items() if not ok)})"),
                  highlight=False, soft_wrap=True)
    return beats, passed


def save_summary(path: Path, env_id: str, rows: dict[str, Row], beats: dict[str, bool], passed: bool,
                 answer: str) -> None:
    """The demo's rows and verdict as JSON beside the run."""
    summary = {"env": env_id, "rows": {key: vars(row) for key, row in rows.items()}, "beats": beats,
               "verdict": passed, "best_constant_answer": answer}
    path.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    sys.exit(main())
