"""Advantage-estimator speed at 256 sequences x 2048 tokens x 5 turns (loss mask on ~half the tokens).

Prints one JSON object on stdout: ms per call for every built-in estimator, for the plain
per-token loop references of bilevel/masked/turnwise GAE (the ones in tests/test_estimators.py,
timed on a slice of rows and scaled to the full batch), and, when verl is importable, for verl's
own estimators, with ratios against ours measured in the same run.  Run it twice::

    .venv/bin/python benchmarks/estimators.py            # ours + loop references
    .venvs/verl/bin/python benchmarks/estimators.py      # + verl (bash scripts/test.d/verl.sh --setup)

Targets: bilevel, masked and turnwise GAE < 100 ms per call; never slower than verl's equivalent.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.progress import Progress

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.test_estimators (loop refs)

import vista_rl  # noqa: E402
from vista_rl.builtin.estimators import BUILTIN_ESTIMATORS  # noqa: E402
from vista_rl.estimator import AdvantageBatch  # noqa: E402

TARGET_MS = 100.0
TARGETED = ("bilevel_gae", "masked_gae", "turnwise_gae")


def make_batch(rows: int, tokens: int, turns: int, group: int, seed: int = 0) -> AdvantageBatch:
    """``turns`` x (observation, response) per row with random split points; the response halves
    cover about half the tokens; rewards at every turn end; float32 like a real trainer."""
    gen = torch.Generator().manual_seed(seed)
    span = tokens // turns
    start = torch.arange(turns) * span  # [turns]
    obs_len = torch.randint(span // 4, 3 * span // 4, (rows, turns), generator=gen)
    resp_start = start + obs_len  # [rows, turns]
    resp_end = (start + span).expand(rows, turns) - torch.randint(0, span // 8, (rows, turns), generator=gen)
    pos = torch.arange(tokens).view(1, 1, tokens)
    inside = (pos >= resp_start.unsqueeze(-1)) & (pos < resp_end.unsqueeze(-1))
    loss = inside.any(dim=1).float()
    ends = torch.zeros(rows, tokens)
    ends.scatter_(1, resp_end - 1, 1.0)
    rewards = ends * torch.randn(rows, tokens, generator=gen)
    values = torch.randn(rows, tokens, generator=gen)
    return AdvantageBatch(token_rewards=rewards, response_mask=loss, advantage_mask=loss.clone(),
                          group_ids=torch.arange(rows) // group, values=values, turn_ends=ends)


def slice_rows(batch: AdvantageBatch, rows: int) -> AdvantageBatch:
    def cut(x: Any) -> Any:
        return None if x is None else x[:rows].to(torch.float64) if x.is_floating_point() else x[:rows]
    return AdvantageBatch(**{name: cut(getattr(batch, name)) for name in batch.__dataclass_fields__})


def time_ms(fn: Callable[[], Any], repeats: int, warmup: int = 2) -> dict[str, float]:
    """Median and best wall time of ``repeats`` calls, in milliseconds (the machine is shared:
    the best is the least disturbed call)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return {"median": round(statistics.median(samples), 3), "best": round(min(samples), 3)}


def verl_calls(batch: AdvantageBatch) -> dict[str, Callable[[], Any]] | None:
    try:
        from verl.trainer.config import AlgoConfig
        from verl.trainer.ppo import core_algos
    except ImportError:
        return None
    uids = np.array([f"uid-{int(g)}" for g in batch.group_ids], dtype=object)  # type: ignore[union-attr]
    r, m, v = batch.token_rewards, batch.response_mask, batch.values
    return {
        "gae": lambda: core_algos.compute_gae_advantage_return(r, v, m, 1.0, 1.0),
        "grpo": lambda: core_algos.compute_grpo_outcome_advantage(r.clone(), m, uids),
        "grpo_vectorized": lambda: core_algos.compute_grpo_vectorized_outcome_advantage(r.clone(), m, uids),
        "rloo": lambda: core_algos.compute_rloo_outcome_advantage(r.clone(), m, uids),
        "reinforce_plus_plus": lambda: core_algos.compute_reinforce_plus_plus_outcome_advantage(
            r, m, config=AlgoConfig(gamma=1.0)),
        "reinforce_plus_plus_baseline": lambda: core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(
            r.clone(), m, uids),
    }


#: our estimator -> the verl estimator computing the same thing
VERL_EQUIVALENT = {
    "masked_gae": "gae", "gae": "gae", "grpo": "grpo", "rloo": "rloo",
    "reinforce_plus_plus": "reinforce_plus_plus", "reinforce_plus_plus_baseline": "reinforce_plus_plus_baseline",
}


def time_all(batch: AdvantageBatch, verl: dict[str, Callable[[], Any]] | None, repeats: int,
             progress: Progress, task: Any) -> dict[str, Any]:
    """Ours and verl's at the current torch thread count, with verl-over-ours ratios and targets."""
    ours: dict[str, dict[str, float]] = {}
    for estimator_id in BUILTIN_ESTIMATORS:
        fn = vista_rl.make_estimator(estimator_id)
        ours[estimator_id] = time_ms(lambda fn=fn: fn(batch), repeats)
        progress.advance(task)
    result: dict[str, Any] = {"ours_ms": ours}
    targets = {f"{name}_under_{TARGET_MS:g}ms": ours[name]["median"] < TARGET_MS for name in TARGETED}
    if verl is not None:
        verl_ms: dict[str, dict[str, float]] = {}
        for name, call in verl.items():
            verl_ms[name] = time_ms(call, max(3, repeats // 2), warmup=1)
            progress.advance(task)
        result["verl_ms"] = verl_ms
        result["verl_over_ours"] = {  # > 1: ours is faster (medians)
            f"{name}_vs_verl_{other}": round(verl_ms[other]["median"] / ours[name]["median"], 2)
            for name, other in VERL_EQUIVALENT.items()
        }
        targets["never_slower_than_verl"] = all(
            ours[name]["median"] <= verl_ms[other]["median"] for name, other in VERL_EQUIVALENT.items()
        )
    result["targets"] = targets
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--group", type=int, default=8, help="samples per group (GRPO/RLOO)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", default="1,2", help="torch thread counts to time at, comma-separated")
    parser.add_argument("--loop-rows", type=int, default=4, help="rows the loop references run on")
    args = parser.parse_args()

    batch = make_batch(args.rows, args.tokens, args.turns, args.group)
    from tests import test_estimators as refs  # the plain per-token loops the tests compare against

    loops: dict[str, Callable[[AdvantageBatch], Any]] = {
        "masked_gae": lambda b: refs.ref_gae(b, 1.0, 1.0, masked=True),
        "bilevel_gae": lambda b: refs.ref_bilevel(b, 1.0, 1.0, 0.95, 1.0),
        "turnwise_gae": lambda b: refs.ref_turnwise(b, 0.95, 1.0),
    }
    verl = verl_calls(batch)
    thread_counts = [int(part) for part in args.threads.split(",") if part.strip()]
    per_threads: dict[str, Any] = {}
    loop_ms: dict[str, float] = {}
    load_before = os.getloadavg()[0]
    total = len(thread_counts) * (len(BUILTIN_ESTIMATORS) + (len(verl) if verl else 0)) + len(loops)
    with Progress(transient=True) as progress:
        task = progress.add_task("timing estimators", total=total)
        for threads in thread_counts:
            torch.set_num_threads(threads)
            per_threads[f"threads={threads}"] = time_all(batch, verl, args.repeats, progress, task)
        small = slice_rows(batch, args.loop_rows)
        for name, loop in loops.items():
            elapsed = time_ms(lambda loop=loop: loop(small), repeats=1, warmup=0)["best"]
            loop_ms[name] = round(elapsed * args.rows / args.loop_rows, 1)
            progress.advance(task)

    first = per_threads[f"threads={thread_counts[0]}"]["ours_ms"]
    report: dict[str, Any] = {
        "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2),
                              "cores": os.cpu_count()},
        "shape": {"rows": args.rows, "tokens": args.tokens, "turns": args.turns, "group": args.group,
                  "loss_mask_fraction": round(batch.response_mask.mean().item(), 3), "dtype": "float32"},
        "torch": torch.__version__,
        "verl_version": None,
        **per_threads,
        "loop_reference_ms": loop_ms,
        "loop_reference_note": (f"per-token Python loops from tests/test_estimators.py timed once on "
                                f"{args.loop_rows} rows (float64) and scaled x{args.rows / args.loop_rows:g} "
                                "to the full batch (too slow to run in full)"),
        f"speedup_vs_loop_threads={thread_counts[0]}": {
            name: round(loop_ms[name] / first[name]["median"], 1) for name in loop_ms},
    }
    if verl is not None:
        import verl as verl_package

        report["verl_version"] = verl_package.__version__
    else:
        report["verl_note"] = "verl not importable here; run with .venvs/verl/bin/python for verl numbers"
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
