"""Advantage-estimator speed at 256 sequences x 2048 tokens x 5 turns (loss mask on ~half the tokens), vs verl.

Prints one JSON object on stdout: per torch thread count, ms per call (median, min-max) of every
built-in estimator and, for those verl also has, of verl's equivalent, interleaved call by call
(ours, verl, ours, verl ...) with fresh input tensors and caches evicted before each call, and
verl-over-ours ratios of the medians; plus the plain per-token loop references of
bilevel/masked/turnwise GAE (tests/test_estimators.py, timed on a slice of rows and scaled).
verl is the anchor: imported here when it imports, else run in verl's own venv (``.venvs/verl``,
built by ``bash scripts/test.d/verl.sh --setup``; ``--verl-python`` to point elsewhere) through a
worker subprocess that times its own calls; without either, the verl half says "skipped".

    .venv/bin/python benchmarks/estimators.py [--tiny] [--threads 1,2] [--repeats 15]

Targets: bilevel, masked and turnwise GAE < 100 ms per call; never slower than verl's equivalent.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.test_estimators (loop refs)
sys.path.insert(0, str(ROOT / "benchmarks"))  # _bench, also when imported by the verl worker

from _bench import (  # noqa: E402
    COLD_BYTES,
    WORKER_LOOP,
    ColdCache,
    Worker,
    dist_versions,
    interleave,
    machine,
    ratio,
    summarize,
)

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


def fresh(batch: AdvantageBatch) -> AdvantageBatch:
    """A copy with new tensors, so no call finds its inputs in cache (or mutated by the last one)."""
    return AdvantageBatch(**{name: None if getattr(batch, name) is None else getattr(batch, name).clone()
                             for name in batch.__dataclass_fields__})


def verl_functions(batch: AdvantageBatch) -> dict[str, Callable[[AdvantageBatch], Any]] | None:
    """verl's estimators on one of our batches (uids as verl passes them, built once: trainer input)."""
    try:
        from verl.trainer.config import AlgoConfig
        from verl.trainer.ppo import core_algos
    except ImportError:
        return None
    uids = np.array([f"uid-{int(g)}" for g in batch.group_ids], dtype=object)  # type: ignore[union-attr]
    return {
        "gae": lambda b: core_algos.compute_gae_advantage_return(b.token_rewards, b.values, b.response_mask,
                                                                  1.0, 1.0),
        "grpo": lambda b: core_algos.compute_grpo_outcome_advantage(b.token_rewards, b.response_mask, uids),
        "grpo_vectorized": lambda b: core_algos.compute_grpo_vectorized_outcome_advantage(
            b.token_rewards, b.response_mask, uids),
        "rloo": lambda b: core_algos.compute_rloo_outcome_advantage(b.token_rewards, b.response_mask, uids),
        "reinforce_plus_plus": lambda b: core_algos.compute_reinforce_plus_plus_outcome_advantage(
            b.token_rewards, b.response_mask, config=AlgoConfig(gamma=1.0)),
        "reinforce_plus_plus_baseline": lambda b: core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(
            b.token_rewards, b.response_mask, uids),
    }


#: our estimator -> the verl estimator computing the same thing
VERL_EQUIVALENT = {
    "masked_gae": "gae", "gae": "gae", "grpo": "grpo", "rloo": "rloo",
    "reinforce_plus_plus": "reinforce_plus_plus", "reinforce_plus_plus_baseline": "reinforce_plus_plus_baseline",
}

#: verl's half in verl's own venv: argv = rows tokens turns group; ops are verl's estimator names
VERL_WORKER = WORKER_LOOP + r'''
import sys
sys.path.insert(0, sys.argv[1])
try:
    import torch, verl
    from _bench import ColdCache
    from estimators import fresh, make_batch, verl_functions
    batch = make_batch(*(int(x) for x in sys.argv[2:6]))
    functions = verl_functions(batch)
    cold, state = ColdCache(), {}
    def before(i, arg):
        state["batch"] = fresh(batch)
        cold()
    ops = {name: (lambda i, arg, fn=fn: fn(state["batch"])) for name, fn in functions.items()}
    ops["_before"] = before
    ops["threads"] = lambda i, arg: torch.set_num_threads(int(arg))
    print(json.dumps({"ok": True, "versions": {"verl": verl.__version__, "torch": torch.__version__,
                                               "python": sys.version.split()[0]}}), flush=True)
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
    sys.exit(0)
serve(ops)
'''


class VerlSide:
    """verl's estimators, in this process when verl imports here, else in ``python`` (verl's venv)."""

    def __init__(self, batch: AdvantageBatch, args: argparse.Namespace) -> None:
        self.worker: Worker | None = None
        self.local = verl_functions(batch)
        self.batch = batch
        self.versions: dict[str, Any] | None = None
        self.where = "skipped"
        if self.local is not None:
            import verl

            self.versions = {"verl": verl.__version__, "torch": torch.__version__, "python": sys.version.split()[0]}
            self.where = "in-process"
            self.names = list(self.local)
            return
        python = Path(args.verl_python)
        if not python.exists():
            self.reason = f"verl not importable here and no verl venv at {python} (bash scripts/test.d/verl.sh --setup)"
            return
        worker = Worker(python, VERL_WORKER, [str(Path(__file__).resolve().parent), str(args.rows),
                                              str(args.tokens), str(args.turns), str(args.group)])
        if "error" in worker.setup:
            self.reason = f"verl venv {python}: {worker.setup['error']}"
            worker.close()
            return
        self.worker, self.versions, self.where = worker, worker.setup["versions"], f"subprocess {python}"
        self.names = list(VERL_EQUIVALENT.values()) + ["grpo_vectorized"]

    @property
    def available(self) -> bool:
        return self.versions is not None

    def set_threads(self, threads: int) -> None:
        if self.worker is not None:
            self.worker.call(op="threads", arg=threads)

    def side(self, name: str, cold: ColdCache) -> Callable[[int, int], list[float]]:
        if self.worker is not None:
            worker = self.worker

            def remote(start: int, n: int) -> list[float]:
                answer = worker.call(op=name, start=start, n=n, cold=True)
                if "error" in answer:
                    raise RuntimeError(f"verl {name}: {answer['error']}")
                return list(answer["times"])
            return remote
        assert self.local is not None
        return local_side(self.local[name], self.batch, cold)

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


def local_side(fn: Callable[[AdvantageBatch], Any], batch: AdvantageBatch,
               cold: ColdCache) -> Callable[[int, int], list[float]]:
    """``n`` calls of ``fn``, each on fresh inputs after the caches were evicted (both untimed)."""
    def run(start: int, n: int) -> list[float]:
        out = []
        for _ in range(n):
            inputs = fresh(batch)
            cold()
            t0 = time.perf_counter()
            fn(inputs)
            out.append(time.perf_counter() - t0)
        return out
    return run


def time_all(batch: AdvantageBatch, verl: VerlSide, repeats: int, warmup: int, cold: ColdCache,
             progress: Progress, task: Any) -> dict[str, Any]:
    """Ours against verl's at the current torch thread count, interleaved call by call (A B A B),
    cold caches, with medians, min-max and verl-over-ours ratios of the medians."""
    ours: dict[str, Any] = {}
    pairs: dict[str, Any] = {}
    functions = {estimator_id: vista_rl.make_estimator(estimator_id) for estimator_id in BUILTIN_ESTIMATORS}
    for estimator_id, fn in functions.items():
        side = local_side(fn, batch, cold)
        side(0, warmup)
        other = VERL_EQUIVALENT.get(estimator_id) if verl.available else None
        if other is None:
            ours[estimator_id] = summarize(side(0, repeats))
        else:
            try:
                anchor = verl.side(other, cold)
                anchor(0, warmup)
                a, b = interleave(side, anchor, repeats, 1)
                ours[estimator_id] = summarize(a)
                verl_s = summarize(b)
                pairs[f"{estimator_id}_vs_verl_{other}"] = {"ours": ours[estimator_id], "verl": verl_s,
                                                            "verl_over_ours": ratio(verl_s, ours[estimator_id])}
            except Exception as exc:  # one failing pair is reported, the rest still run
                pairs[f"{estimator_id}_vs_verl_{other}"] = {"status": "failed", "reason": str(exc)}
                ours[estimator_id] = summarize(side(0, repeats))
        progress.advance(task)
    result: dict[str, Any] = {"ours_ms": ours}
    targets = {f"{name}_under_{TARGET_MS:g}ms": ours[name]["median_ms"] < TARGET_MS for name in TARGETED}
    if verl.available:
        result["vs_verl"] = pairs
        measured = [p for p in pairs.values() if "verl" in p]
        targets["never_slower_than_verl"] = bool(measured) and all(
            p["ours"]["median_ms"] <= p["verl"]["median_ms"] for p in measured)
    result["targets"] = targets
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="16 x 128 tokens, 3 repeats (for tests)")
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--group", type=int, default=8, help="samples per group (GRPO/RLOO)")
    parser.add_argument("--repeats", type=int, default=15, help="interleaved pairs per estimator")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", default="1,2", help="torch thread counts to time at, comma-separated")
    parser.add_argument("--loop-rows", type=int, default=4, help="rows the loop references run on")
    parser.add_argument("--verl-python", default=str(ROOT / ".venvs" / "verl" / "bin" / "python"),
                        help="verl's venv, used when verl does not import here")
    args = parser.parse_args()
    if args.tiny:
        args.rows, args.tokens, args.repeats, args.warmup, args.threads, args.loop_rows = 16, 128, 3, 1, "1", 2

    batch = make_batch(args.rows, args.tokens, args.turns, args.group)
    from tests import test_estimators as refs  # the plain per-token loops the tests compare against

    loops: dict[str, Callable[[AdvantageBatch], Any]] = {
        "masked_gae": lambda b: refs.ref_gae(b, 1.0, 1.0, masked=True),
        "bilevel_gae": lambda b: refs.ref_bilevel(b, 1.0, 1.0, 0.95, 1.0),
        "turnwise_gae": lambda b: refs.ref_turnwise(b, 0.95, 1.0),
    }
    report: dict[str, Any] = {"benchmark": "estimators", "machine": machine()}
    verl = VerlSide(batch, args)
    cold = ColdCache()
    thread_counts = [int(part) for part in args.threads.split(",") if part.strip()]
    per_threads: dict[str, Any] = {}
    loop_ms: dict[str, float] = {}
    total = len(thread_counts) * len(BUILTIN_ESTIMATORS) + len(loops)
    try:
        with Progress(transient=True, console=Console(file=sys.stderr)) as progress:
            task = progress.add_task("timing estimators", total=total)
            for threads in thread_counts:
                torch.set_num_threads(threads)
                verl.set_threads(threads)
                per_threads[f"threads={threads}"] = time_all(batch, verl, args.repeats, args.warmup, cold,
                                                             progress, task)
            small = slice_rows(batch, args.loop_rows)
            for name, loop in loops.items():
                t0 = time.perf_counter()
                loop(small)
                loop_ms[name] = round((time.perf_counter() - t0) * 1e3 * args.rows / args.loop_rows, 1)
                progress.advance(task)
    finally:
        verl.close()

    first = per_threads[f"threads={thread_counts[0]}"]["ours_ms"]
    report.update({
        "anchor": f"verl ({verl.where})" if verl.available else f"skipped: {verl.reason}",
        "method": "each pair interleaved call by call (ours, verl, ours, verl ...), fresh input tensors and "
                  f"{COLD_BYTES >> 20} MiB written between calls (cold caches), both untimed",
        "versions": {"ours": {**dist_versions("vista-rl"), "torch": torch.__version__},
                     "anchor": verl.versions},
        "shape": {"rows": args.rows, "tokens": args.tokens, "turns": args.turns, "group": args.group,
                  "loss_mask_fraction": round(batch.response_mask.mean().item(), 3), "dtype": "float32",
                  "repeats": args.repeats},
        **per_threads,
        "loop_reference_ms": loop_ms,
        "loop_reference_note": (f"per-token Python loops from tests/test_estimators.py timed once on "
                                f"{args.loop_rows} rows (float64) and scaled x{args.rows / args.loop_rows:g} "
                                "to the full batch (too slow to run in full)"),
        f"speedup_vs_loop_threads={thread_counts[0]}": {
            name: round(loop_ms[name] / first[name]["median_ms"], 1) for name in loop_ms},
    })
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
