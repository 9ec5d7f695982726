"""The local GRPO step's training work with and without issue 28's item 5 and issue 25's log-prob
finding: each unique image through the vision tower once per mini-batch, and no old-log-prob pass
when it must equal the update's own log-probs.

    python benchmarks/vision_dedup.py [--tiny] [--repeats 15] [--seeds-per-step 8] [--group-size 4]

One real RL step of the local engine (the tiny Qwen2.5-VL from ``vista_rl_sdk.tiny_models``, the
oddshape env's one-turn task: one image per sample, shared by the G samples of a seed, fp32) gives
the batch.  On it, in one process, four sides are timed, rotating call by call (baseline, dedup,
skip, both; then shifted by one, ...), after one untimed warm-up call each:

- baseline (the anchor: the engine before the change): the old-log-prob pass (no grad, micro-batch
  by micro-batch), then the update's forward and backward, every image occurrence encoded;
- dedup: the same two passes, each encoding every unique image once (``Policy.shared_vision``);
- skip: the update alone, every occurrence encoded;
- both: the update alone with dedup (the engine's behaviour now).

The loss is the sum of the response log-probs (the policy-gradient shape; the optimizer step and
advantages are the same on every side and left out).  A forward hook counts the patches the vision
tower sees per side.  The JSON gives per side the median and min-max, baseline-over-side ratios of
the medians (> 1: faster than the anchor), and the engine's own rollout time of that step, so that
the step time before and after is rollout + train.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _bench import dist_versions, machine, ratio, summarize

ENV = {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 56, "prompt_format": "no_think"}}
#: side -> (encode each unique image once, skip the old-log-prob pass)
SIDES = {"baseline": (False, False), "dedup": (True, False), "skip": (False, True), "both": (True, True)}


def rollout_batch(model_dir: Path, work: Path, args: argparse.Namespace) -> tuple[Any, list[Any], float]:
    """The engine (its policy) and the training sequences of one real RL step, and its rollout time."""
    from rich.console import Console
    from vista_plugin_local.metrics import read_jsonl
    from vista_plugin_local.trainer import LocalEngine

    from vista_rl.config import RunConfig, validate_config

    run = validate_config(RunConfig, {
        "seed": 0, "output_dir": str(work / "run"), "env": ENV, "model": {"path": str(model_dir)},
        "rollout": {"max_turns": 1, "group_size": args.group_size,
                    "sampling": {"temperature": 1.0, "max_tokens": args.max_tokens}},
        "trainer": {"steps": 1, "seeds_per_step": args.seeds_per_step, "lr": 1e-6,
                    "micro_batch_size": args.micro_batch_size, "train_seeds": {"start": 0, "count": 1000}},
        "sft": {"steps": 0},
        "eval": {"seeds": {"start": 100_000, "count": 1}, "at_start": False, "after_sft": False},
    })
    engine = LocalEngine(run, console=Console(file=sys.stderr))  # stdout carries only the JSON
    engine.run()
    assert engine.last_batch is not None
    row = [row for row in read_jsonl(work / "run" / "metrics.jsonl") if row.get("stage") == "rl"][-1]
    return engine.policy, [sample.tokens for sample in engine.last_batch.samples], float(row["time_rollout_s"])


def train_work(policy: Any, seqs: list[Any], micro: int, dedup: bool, skip: bool) -> None:
    """What one RL step does after the rollout, as the engine does it (see the module docstring)."""
    import torch

    policy.dedup_vision = dedup
    chunks = [seqs[start:start + micro] for start in range(0, len(seqs), micro)]
    if not skip:
        policy.train(False)
        with torch.no_grad(), policy.shared_vision(seqs, micro):
            for chunk in chunks:
                policy.score(policy.collate(chunk, left_pad=False))
    policy.train(True)
    policy.model.zero_grad(set_to_none=True)
    with policy.shared_vision(seqs, micro):
        for chunk in chunks:
            batch = policy.collate(chunk, left_pad=False)
            scores = policy.score(batch, entropy=True)
            (scores.logprobs * batch["loss_mask"]).sum().backward()


def vision_rows(policy: Any) -> list[int]:
    """Patch rows the vision tower sees, appended by a forward hook."""
    rows: list[int] = []
    tower = policy.model.model.visual
    tower.register_forward_pre_hook(lambda _m, args: rows.append(int(args[0].shape[0])))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2 seeds x 2 samples, 2 repeats (for tests)")
    parser.add_argument("--repeats", type=int, default=15, help="timed calls per side, rotating")
    parser.add_argument("--seeds-per-step", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--micro-batch-size", type=int, default=8)
    args = parser.parse_args()
    if args.tiny:
        args.repeats, args.seeds_per_step, args.group_size, args.max_tokens = 2, 2, 2, 4
    import torch

    from vista_rl_sdk.tiny_models import init_tiny_model

    work = Path(tempfile.mkdtemp(prefix="vista-bench-vision-dedup-"))
    try:
        model_dir = init_tiny_model(work / "model", seed=0)
        policy, seqs, rollout_s = rollout_batch(model_dir, work, args)
        rows = vision_rows(policy)
        names = list(SIDES)
        patches: dict[str, int] = {}
        for side in names:  # warm-up, and the patches each side encodes per step
            rows.clear()
            train_work(policy, seqs, args.micro_batch_size, *SIDES[side])
            patches[side] = sum(rows)
        samples: dict[str, list[float]] = {side: [] for side in names}
        for r in range(args.repeats):
            for side in names[r % len(names):] + names[:r % len(names)]:
                started = time.perf_counter()
                train_work(policy, seqs, args.micro_batch_size, *SIDES[side])
                samples[side].append(time.perf_counter() - started)
        train = {side: summarize(values) for side, values in samples.items()}
        result: dict[str, Any] = {
            "benchmark": "vision_dedup", "machine": machine(), "device": str(policy.device),
            "torch_threads": torch.get_num_threads(), "env": ENV["id"],
            "seeds_per_step": args.seeds_per_step, "group_size": args.group_size, "max_tokens": args.max_tokens,
            "micro_batch_size": args.micro_batch_size, "sequences": len(seqs), "repeats": args.repeats,
            "anchor": "the same engine without the change (every image occurrence encoded, old-log-prob pass kept)",
            "versions": {"ours": {**dist_versions("vista-rl", "vista-plugin-local", "transformers"),
                                  "torch": torch.__version__}},
            "vision_patches_per_step": patches,
            "train": train,
            "baseline_over": {side: ratio(train["baseline"], train[side]) for side in names[1:]},
            "rollout_s_of_the_step": round(rollout_s, 4),
            "step_s_estimate": {side: round(rollout_s + train[side]["median_ms"] / 1e3, 4) for side in ("baseline", "both")},
        }
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
