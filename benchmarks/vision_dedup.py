"""The local GRPO step with and without issue 28's item 5 and issue 25's log-prob finding: each
unique image through the vision tower once per mini-batch, and no old-log-prob pass when it must
equal the update's own log-probs.

    python benchmarks/vision_dedup.py [--tiny] [--steps 4] [--repeats 3] [--seeds-per-step 8] [--group-size 4]

The anchor is the same engine as it was before the change (every image occurrence encoded, the
old-log-prob pass always run), in the same process; the two changes are also measured one at a
time.  The sides rotate run by run (baseline, dedup, skip, both; then shifted by one, ...); each
run's first step is a warm-up and left out.  Setting: the tiny Qwen2.5-VL from
``vista_rl_sdk.tiny_models``, the oddshape env's one-turn task (one image per sample, shared by
the G samples of a seed), fp32, CPU unless a GPU is at hand.  The JSON gives, per side, the median
and min-max of the measured steps' log-prob + update time ("train", what the change touches) and
of the whole step, and baseline-over-both of the medians (> 1: the change is faster).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from _bench import dist_versions, machine, ratio, summarize

ENV = {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 56, "prompt_format": "no_think"}}
#: side -> (encode each unique image once, skip the old-log-prob pass when it equals the update's)
SIDES = {"baseline": (False, False), "dedup": (True, False), "skip": (False, True), "both": (True, True)}


def run_side(side: str, model_dir: Path, work: Path, args: argparse.Namespace, run_name: str) -> dict[str, Any]:
    from rich.console import Console
    from vista_plugin_local.metrics import read_jsonl
    from vista_plugin_local.policy import Policy
    from vista_plugin_local.trainer import LocalEngine

    from vista_rl.config import RunConfig, validate_config

    dedup, skip = SIDES[side]

    class Engine(LocalEngine):
        def _build_policy(self) -> Policy:
            policy = super()._build_policy()
            policy.dedup_vision = dedup
            return policy

        def _old_logprobs_are_update_logprobs(self) -> bool:
            return skip and super()._old_logprobs_are_update_logprobs()

    run = validate_config(RunConfig, {
        "seed": 0, "output_dir": str(work / run_name), "env": ENV, "model": {"path": str(model_dir)},
        "rollout": {"max_turns": 1, "group_size": args.group_size,
                    "sampling": {"temperature": 1.0, "max_tokens": args.max_tokens}},
        "trainer": {"steps": args.steps, "seeds_per_step": args.seeds_per_step, "lr": 1e-4,
                    "micro_batch_size": args.micro_batch_size, "train_seeds": {"start": 0, "count": 1000}},
        "sft": {"steps": 0},
        "eval": {"seeds": {"start": 100_000, "count": 1}, "at_start": False, "after_sft": False},
    })
    Engine(run, console=Console(file=sys.stderr)).run()  # stdout carries only the JSON
    rows = [row for row in read_jsonl(work / run_name / "metrics.jsonl") if row.get("stage") == "rl"][1:]
    shutil.rmtree(work / run_name, ignore_errors=True)
    return {
        "train_s": [float(row["time_logprob_s"]) + float(row["time_update_s"]) for row in rows],
        "logprob_s": [float(row["time_logprob_s"]) for row in rows],
        "update_s": [float(row["time_update_s"]) for row in rows],
        "step_s": [float(row["time_step_s"]) for row in rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2 steps of 2 seeds x 2, 1 repeat (for tests)")
    parser.add_argument("--steps", type=int, default=4, help="steps per run; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side, rotating")
    parser.add_argument("--seeds-per-step", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    args = parser.parse_args()
    if args.tiny:
        args.steps, args.repeats, args.seeds_per_step, args.group_size, args.max_tokens = 2, 1, 2, 2, 4
    import torch

    from vista_rl_sdk.tiny_models import init_tiny_model

    work = Path(tempfile.mkdtemp(prefix="vista-bench-vision-dedup-"))
    try:
        model_dir = init_tiny_model(work / "model", seed=0)
        samples: dict[str, dict[str, list[float]]] = {side: {} for side in SIDES}
        names = list(SIDES)
        for r in range(args.repeats):
            for side in names[r % len(names):] + names[:r % len(names)]:
                for key, values in run_side(side, model_dir, work, args, f"{side}-{r}").items():
                    samples[side].setdefault(key, []).extend(values)
        sides = {side: {key: summarize(values) for key, values in parts.items()} for side, parts in samples.items()}
        result: dict[str, Any] = {
            "benchmark": "vision_dedup", "machine": machine(), "device": "cuda" if torch.cuda.is_available() else "cpu",
            "torch_threads": torch.get_num_threads(), "env": ENV["id"],
            "seeds_per_step": args.seeds_per_step, "group_size": args.group_size, "max_tokens": args.max_tokens,
            "micro_batch_size": args.micro_batch_size, "steps_per_run": args.steps,
            "measured_steps_per_run": args.steps - 1, "repeats": args.repeats,
            "anchor": "the same engine without the change (every image occurrence encoded, old-log-prob pass kept)",
            "versions": {"ours": {**dist_versions("vista-rl", "vista-plugin-local", "transformers"),
                                  "torch": torch.__version__}},
            "sides": sides,
            "baseline_over_both": {key: ratio(sides["baseline"][key], sides["both"][key])
                                   for key in ("train_s", "update_s", "step_s")},
            "baseline_over_dedup_update": ratio(sides["baseline"]["update_s"], sides["dedup"]["update_s"]),
            "baseline_over_skip_train": ratio(sides["baseline"]["train_s"], sides["skip"]["train_s"]),
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
