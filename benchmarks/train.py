"""GRPO step time of the local engine (split rollout / log-prob / update) against TRL's GRPOTrainer.

    python benchmarks/train.py [--tiny] [--steps 5] [--repeats 4] [--trl-python /tmp/trlvenv/bin/python]
        [--device cpu|cuda] [--precision fp32|bf16] [--shape tiny|qwen2.5-0.5b]
        [--trl-settings trl_gc_off,trl_gc_on,trl_liger,trl_padding_free] [--vista-layout auto|...]

TRL is the anchor, run once per repeat in each of its settings (``TRL_SETTINGS``): gradient
checkpointing on (its default: activations are recomputed in the backward, which we do not do) and
off, and off with each speed option TRL may have for this model on this device (``use_liger_kernel``,
``padding_free``).  A setting TRL refuses or that fails is reported with its error and not run again;
the JSON names every setting tried (``trl.settings``, each with its GRPOConfig arguments) and gives
TRL-over-ours for each and for TRL's best (the fastest median), which is the figure the >= 2x target
(issues 25 and 37) is read against.  No reference model (beta 0), no vLLM on either side.  TRL's pins conflict with
the dev environment, so it runs in its own python (--trl-python or VISTA_TRL_PYTHON: a path, or a
command on PATH such as ``python3`` where TRL is importable beside us; without one the TRL half is
reported as skipped).  Both sides: the same random Qwen2.5-VL of ``--shape`` (``benchmarks/_shapes.py``),
the oddshape env's one-turn task (image + question, reward 1 for the right cell), B seeds x G
samples per step, the same max new tokens, temperature 1, the same device and precision (bf16 is
autocast over fp32 weights on both sides).  The sides rotate run by run (ours, TRL off, TRL on;
then TRL off, TRL on, ours; ...); each run's first step is a warm-up and left out; the JSON gives
the median and min-max of all measured steps of each side, ours split into rollout, log-prob and
update, our rollout's generated tokens/s, peak memory, and the versions of both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _bench import dist_versions, machine, ratio, summarize
from _shapes import SHAPES, make_model, parameter_count

ENV = {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 56, "prompt_format": "no_think"}}

TRL_SCRIPT = r'''
import json, sys, time, re
from pathlib import Path
import torch
from PIL import Image
from datasets import Dataset
from transformers import AutoModelForImageTextToText, AutoProcessor, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

spec = json.loads(Path(sys.argv[1]).read_text())
torch.manual_seed(0)
rows = []
for item in spec["items"]:
    rows.append({"prompt": [{"role": "system", "content": [{"type": "text", "text": item["system"]}]},
                            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": item["question"]}]}],
                 "image": Image.open(item["image"]).convert("RGB"), "answer": item["answer"]})
dataset = Dataset.from_list(rows)

def reward(completions, answer, **_):
    out = []
    for completion, truth in zip(completions, answer):
        text = completion if isinstance(completion, str) else completion[0]["content"]
        found = re.search(r"<answer>\s*(\d+)\s*</answer>", text)
        out.append(1.0 if found and int(found.group(1)) == truth else 0.0)
    return out

class Timer(TrainerCallback):
    def __init__(self):
        self.times, self.cpu, self.start = [], [], None
    def on_step_begin(self, *a, **k):
        self.start = (time.perf_counter(), time.process_time())
    def on_step_end(self, *a, **k):
        self.times.append(time.perf_counter() - self.start[0])
        self.cpu.append(time.process_time() - self.start[1])

batch = spec["seeds_per_step"] * spec["group_size"]
cuda = spec["device"] == "cuda"
# the config first: a setting this TRL does not have fails before the model loads
args = GRPOConfig(output_dir=spec["out"], per_device_train_batch_size=batch, num_generations=spec["group_size"],
                  max_completion_length=spec["max_tokens"], max_steps=spec["steps"], learning_rate=1e-4,
                  temperature=1.0, use_cpu=not cuda, bf16=spec["precision"] == "bf16", fp16=False, report_to=[],
                  logging_steps=1, save_strategy="no", gradient_accumulation_steps=1, beta=0.0, seed=0,
                  dataloader_num_workers=0, **spec["trl_config"])
processor = AutoProcessor.from_pretrained(spec["model"])
model = AutoModelForImageTextToText.from_pretrained(spec["model"], dtype=torch.float32)
timer = Timer()
trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=processor,
                      callbacks=[timer])
trainer.train()
# VmHWM, not ru_maxrss: ru_maxrss survives fork+exec, so a child would report its parent's peak.
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
import transformers, trl
gpu_peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
print("TRLJSON " + json.dumps({"step_times_s": timer.times, "step_cpu_s": timer.cpu, "peak_rss_mb": hwm / 1024, "peak_cuda_mb": gpu_peak,
                               "gradient_checkpointing": bool(args.gradient_checkpointing),
                               "in_effect": {key: getattr(args, key, None) for key in spec["trl_config"]},
                               "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                                            "torch": torch.__version__}}))
'''


#: --vista-layout -> engine_config.local settings (auto: the engine's defaults)
LAYOUT_SETTINGS: dict[str, dict[str, Any]] = {
    "auto": {}, "shared_prefix": {"shared_prefix": True}, "packed": {"shared_prefix": False},
    "padded": {"packing": False}}


def vista_layout(layout: str) -> str:
    """The update layout our runs use (what ``auto`` resolves to for this benchmark's GRPO)."""
    if layout != "auto":
        return layout
    try:
        from vista_plugin_local.config import update_layout, validate_engine_config

        from vista_rl.config import RunConfig
    except ImportError:  # an engine from before the layouts (issue 37): the padded batch
        return "padded"
    return update_layout(validate_engine_config(RunConfig.model_validate({"env": ENV})))


def run_vista(model_dir: Path, work: Path, steps: int, seeds_per_step: int, group_size: int,
              max_tokens: int, run_name: str = "vista-run", device: str = "cpu",
              precision: str = "fp32", layout: str = "auto") -> dict[str, Any]:
    from vista_plugin_local.metrics import read_jsonl
    from vista_plugin_local.trainer import LocalEngine

    from vista_rl.config import RunConfig, validate_config

    run = validate_config(RunConfig, {
        "seed": 0, "output_dir": str(work / run_name), "env": ENV, "model": {"path": str(model_dir)},
        "rollout": {"max_turns": 1, "group_size": group_size,
                    "sampling": {"temperature": 1.0, "max_tokens": max_tokens}},
        "trainer": {"steps": steps, "seeds_per_step": seeds_per_step, "lr": 1e-4, "micro_batch_size": 32,
                    "train_seeds": {"start": 0, "count": 1000}},
        "eval": {"seeds": {"start": 100_000, "count": 1}, "at_start": False, "after_sft": False},
        "engine_config": {"local": {"device": device, "precision": precision, **LAYOUT_SETTINGS[layout]}},
    })
    import torch

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    from rich.console import Console
    from vista_plugin_local.rl_step import RLStep

    cpu: list[float] = []  # process CPU time of every RL step (rollout, log-prob, update; not the logging after)
    step = RLStep.__call__

    def timed_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return step(self, *args, **kwargs)
        finally:
            cpu.append(time.process_time() - started)

    RLStep.__call__ = timed_step  # type: ignore[method-assign]
    try:
        LocalEngine(run, console=Console(file=sys.stderr)).run()  # stdout carries only the JSON
    finally:
        RLStep.__call__ = step  # type: ignore[method-assign]
    rows = [row for row in read_jsonl(work / run_name / "metrics.jsonl") if row.get("stage") == "rl"][1:]

    def avg(key: str) -> float:
        return sum(float(row[key]) for row in rows) / len(rows)

    return {
        "status": "ok", "step_times_s": [float(row["time_step_s"]) for row in rows],
        "step_cpu_s": cpu[1:],
        "step_s": avg("time_step_s"), "rollout_s": avg("time_rollout_s"), "logprob_s": avg("time_logprob_s"),
        "update_s": avg("time_update_s"), "tokens_per_s": avg("tokens_per_s"),
        "gen_tokens_per_s": avg("gen_tokens_per_s"), "sequence_tokens_mean": avg("sequence_tokens_mean"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "peak_cuda_mb": torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None,
    }


def run_trl(trl_python: str, model_dir: Path, work: Path, steps: int, seeds_per_step: int, group_size: int,
            max_tokens: int, run_name: str = "trl-out", device: str = "cpu", precision: str = "fp32",
            trl_config: dict[str, Any] | None = None) -> dict[str, Any]:
    """One TRL run with ``trl_config`` (GRPOConfig keyword arguments) over the defaults."""
    import vista_rl

    items = []
    (work / "images").mkdir(exist_ok=True)
    for seed in range(steps * seeds_per_step):
        env = vista_rl.make_env(ENV["id"], **ENV["config"])
        observation, info = env.reset(seed=seed)
        path = work / "images" / f"{seed}.png"
        observation.images[0].save(path)
        question = observation.text.replace("<image>", "").strip()
        items.append({"system": env.system_prompt(), "question": question, "image": str(path),
                      "answer": int(info["answer"])})
    spec = {"model": str(model_dir), "items": items, "out": str(work / run_name), "steps": steps,
            "seeds_per_step": seeds_per_step, "group_size": group_size, "max_tokens": max_tokens,
            "device": device, "precision": precision, "trl_config": trl_config or {}}
    (work / "spec.json").write_text(json.dumps(spec))
    (work / "trl_grpo.py").write_text(TRL_SCRIPT)
    started = time.perf_counter()
    proc = subprocess.run([trl_python, str(work / "trl_grpo.py"), str(work / "spec.json")], capture_output=True,
                          text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"}, timeout=900)
    wall = time.perf_counter() - started
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("TRLJSON ")), None)
    if proc.returncode != 0 or line is None:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        return {"status": "failed", "returncode": proc.returncode, "error": lines[-1] if lines else None,
                "stderr_tail": proc.stderr[-1500:]}
    data = json.loads(line[len("TRLJSON "):])
    times = data["step_times_s"][1:] or data["step_times_s"]
    cpu = data.get("step_cpu_s", [])[1:] or data.get("step_cpu_s", [])
    return {"status": "ok", "step_times_s": times, "step_cpu_s": cpu, "step_s": sum(times) / len(times),
            "peak_rss_mb": data["peak_rss_mb"], "peak_cuda_mb": data.get("peak_cuda_mb"), "wall_s": wall,
            "versions": data["versions"],
            "gradient_checkpointing": data["gradient_checkpointing"], "in_effect": data.get("in_effect")}


def trl_version(trl_python: str) -> dict[str, Any]:
    """Versions in the TRL venv (for the report even when a run fails)."""
    code = ("import json\nfrom importlib import metadata as m\nout = {}\nfor n in ('trl', 'transformers', 'torch'):\n"
            "    try:\n        out[n] = m.version(n)\n    except m.PackageNotFoundError:\n        out[n] = None\n"
            "print(json.dumps(out))")
    proc = subprocess.run([trl_python, "-c", code], capture_output=True, text=True, timeout=120)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}


def resolve_python(name: str) -> str | None:
    """A python given as a path or as a command on PATH (``python3`` on a machine where TRL sits
    beside us), or None when there is none."""
    if Path(name).exists():
        return name
    return shutil.which(name) if os.sep not in name else None


#: per shape: seeds per step, group size, max new tokens (issue 25: 8 x 8 and 64 tokens on the GPU)
DEFAULTS = {"tiny": (8, 4, 8), "qwen2.5-0.5b": (8, 8, 64)}
#: TRL's settings, each a side of the comparison: GRPOConfig arguments over the shared ones.  Gradient
#: checkpointing off is TRL's fastest of its own two; ``use_liger_kernel`` swaps in Liger's Triton
#: kernels (RMSNorm, SwiGLU, RoPE; TRL 1.16 keeps its own chunked LM-head log-probs); ``padding_free``
#: packs without padding where a TRL trainer has it (TRL 1.16: SFT and DPO, not GRPO).  Whether each
#: works for Qwen2.5-VL on the device is what the run finds out.
TRL_SETTINGS: dict[str, dict[str, Any]] = {
    "trl_gc_off": {"gradient_checkpointing": False},
    "trl_gc_on": {"gradient_checkpointing": True},
    "trl_liger": {"gradient_checkpointing": False, "use_liger_kernel": True},
    "trl_padding_free": {"gradient_checkpointing": False, "padding_free": True},
}
SIDES = ("vista", *TRL_SETTINGS)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2 steps of 2 seeds x 2, 1 repeat (for tests)")
    parser.add_argument("--steps", type=int, default=5, help="steps per run; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=4, help="runs per side, rotating")
    parser.add_argument("--seeds-per-step", type=int, default=None, help="default: 8")
    parser.add_argument("--group-size", type=int, default=None, help="default: 4 (tiny), 8 (qwen2.5-0.5b)")
    parser.add_argument("--max-tokens", type=int, default=None, help="default: 8 (tiny), 64 (qwen2.5-0.5b)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--shape", choices=tuple(SHAPES), default="tiny")
    parser.add_argument("--trl-python", default=os.environ.get("VISTA_TRL_PYTHON", "/tmp/trlvenv/bin/python"))
    parser.add_argument("--trl-gc", choices=("both", "off", "on"), default="both",
                        help="TRL's gradient checkpointing settings to run (default both)")
    parser.add_argument("--trl-settings", default=",".join(TRL_SETTINGS),
                        help=f"TRL settings to try, comma-separated (default all: {', '.join(TRL_SETTINGS)})")
    parser.add_argument("--vista-layout", choices=("auto", "shared_prefix", "packed", "padded"), default="auto",
                        help="how our update lays out its rows (engine_config.local.packing / shared_prefix; "
                             "auto: the engine's default, shared_prefix for GRPO)")
    args = parser.parse_args()
    seeds, group, tokens = DEFAULTS[args.shape]
    args.seeds_per_step = args.seeds_per_step or seeds
    args.group_size = args.group_size or group
    args.max_tokens = args.max_tokens or tokens
    if args.tiny:
        args.steps, args.repeats, args.seeds_per_step, args.group_size, args.max_tokens = 2, 1, 2, 2, 4
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device is available")
    work = Path(tempfile.mkdtemp(prefix="vista-bench-train-"))
    trl_python = resolve_python(args.trl_python)
    chosen = [name.strip() for name in args.trl_settings.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(TRL_SETTINGS))
    if unknown:
        raise SystemExit(f"--trl-settings: unknown {', '.join(unknown)}; choose from {', '.join(TRL_SETTINGS)}")
    gc_off = {"both": (False, True), "off": (False,), "on": (True,)}[args.trl_gc]
    sides = ["vista"] + [side for side in TRL_SETTINGS if trl_python and side in chosen
                         and TRL_SETTINGS[side]["gradient_checkpointing"] in gc_off]
    setting = {"device": args.device, "precision": args.precision}
    stopped = False
    try:
        model_dir = make_model(args.shape, work / "model", seed=0)
        shape = (args.steps, args.seeds_per_step, args.group_size, args.max_tokens)
        result: dict[str, Any] = {
            "benchmark": "grpo_step", "machine": machine(), "env": ENV["id"], "torch_threads": torch.get_num_threads(),
            "device": args.device, "device_name": torch.cuda.get_device_name() if args.device == "cuda" else None,
            "precision": args.precision, "shape": args.shape, "parameters": parameter_count(model_dir),
            "seeds_per_step": args.seeds_per_step, "group_size": args.group_size, "max_tokens": args.max_tokens,
            "steps_per_run": args.steps, "measured_steps_per_run": args.steps - 1, "repeats": args.repeats,
            "anchor": (f"trl GRPOTrainer (beta=0), settings: {', '.join(sides[1:])}" if trl_python
                       else f"skipped: no TRL environment at {args.trl_python}"),
            "trl_settings_tried": {side: TRL_SETTINGS[side] for side in sides[1:]},
            "vista_layout": vista_layout(args.vista_layout),
            "versions": {"ours": {**dist_versions("vista-rl", "vista-plugin-local", "transformers"),
                                  "torch": torch.__version__},
                         "anchor": trl_version(trl_python) if trl_python else None},
        }
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        # a time limit (timeout's SIGTERM) ends the runs early but still prints what was measured
        signal.signal(signal.SIGTERM, _stop)
        try:
            _run_sides(args, sides, runs, model_dir, work, shape, trl_python, setting)
        except _Stopped:
            stopped = True
            result["stopped_early"] = "SIGTERM (a time limit): the runs finished before it are reported"
        result.update(summarize_sides(runs, trl_python is not None, args.trl_python))
        print(json.dumps(result, indent=2), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if stopped:
        os._exit(0)  # an interrupted run may leave a non-daemon thread (its store writer) that would hold the exit


class _Stopped(BaseException):  # not an Exception: the per-run handler must not swallow it
    """Raised by the SIGTERM handler inside the runs."""


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped()


def _run_sides(args: argparse.Namespace, sides: list[str], runs: dict[str, list[dict[str, Any]]], model_dir: Path,
               work: Path, shape: tuple[int, int, int, int], trl_python: str | None, setting: dict[str, str]) -> None:
    """The repeats, each running every side once, in rotating order (each side goes first in turn)."""
    for r in range(args.repeats):
        shift = r % len(sides)
        for side in sides[shift:] + sides[:shift]:
            try:
                if side == "vista":
                    runs[side].append(run_vista(model_dir, work, *shape, run_name=f"vista-run-{r}",
                                                layout=args.vista_layout, **setting))
                elif runs[side] and not any(run.get("status") == "ok" for run in runs[side]):
                    continue  # a setting that only failed (refused, or unsupported here) is not run again
                else:
                    assert trl_python is not None
                    runs[side].append(run_trl(trl_python, model_dir, work, *shape, run_name=f"{side}-{r}",
                                              trl_config=TRL_SETTINGS[side], **setting))
            except Exception as exc:  # noqa: BLE001 - one failed run is reported, the others still count
                runs[side].append({"status": "failed", "error": f"{type(exc).__name__}: {exc}"})


def summarize_sides(runs: dict[str, list[dict[str, Any]]], have_trl: bool, trl_python: str) -> dict[str, Any]:
    """Per side: the step summary and the runs; ours also split; TRL-over-ours per TRL setting and
    for TRL's best (the faster median)."""
    ok = {side: [run for run in side_runs if run.get("status") == "ok"] for side, side_runs in runs.items()}
    steps = {side: summarize([t for run in side_ok for t in run["step_times_s"]]) for side, side_ok in ok.items()}
    cpu = {side: summarize([t for run in side_ok for t in run.get("step_cpu_s", [])]) for side, side_ok in ok.items()}
    out: dict[str, Any] = {}
    vista_ok = ok["vista"]
    out["vista"] = {"step": steps["vista"], "step_cpu": cpu["vista"], "runs": runs["vista"]}
    if vista_ok:
        def mean(key: str) -> float | None:
            values = [run[key] for run in vista_ok if run.get(key) is not None]
            return round(sum(values) / len(values), 4) if values else None

        out["vista"]["split_s"] = {key: mean(f"{key}_s") for key in ("rollout", "logprob", "update")}
        out["vista"]["rollout_gen_tokens_per_s"] = mean("gen_tokens_per_s")
        out["vista"]["peak_cuda_mb"] = mean("peak_cuda_mb")
    if not have_trl:
        out["trl"] = {"status": "skipped", "reason": f"no TRL environment at {trl_python}"}
        return out
    settings: dict[str, Any] = {}
    ratios: dict[str, float | None] = {}
    cpu_ratios: dict[str, float | None] = {}
    for side in runs:
        if side == "vista":
            continue
        settings[side] = {"status": "ok" if ok[side] else "failed", "config": TRL_SETTINGS.get(side),
                          "step": steps[side], "step_cpu": cpu[side], "runs": runs[side]}
        ratios[side] = ratio(steps[side], steps["vista"])
        cpu_ratios[side] = ratio(cpu[side], cpu["vista"])
    # "status" and "step" are TRL's best setting (what benchmarks/report.py tabulates)
    out["trl"] = {"status": "failed", "settings": settings}
    timed_sides = [side for side in ratios if steps[side].get("n")]
    if timed_sides:
        best = min(timed_sides, key=lambda side: steps[side]["median_ms"])
        out["trl"].update(status="ok", step=steps[best], best_setting=best)
        out["trl_best_setting"] = best
        ratios["trl_best"] = ratios[best]
        cpu_timed = [side for side in timed_sides if cpu[side].get("n")]
        if cpu_timed:
            cpu_best = min(cpu_timed, key=lambda side: cpu[side]["median_ms"])
            cpu_ratios["trl_best"] = cpu_ratios[cpu_best]
            out["trl_best_setting_cpu"] = cpu_best
        out["trl_step_over_vista_step"] = ratios[best]
    out["trl_over_vista"] = ratios
    # the same from each process's CPU time per step (each side's fastest setting by CPU time): less
    # sensitive than wall time to other work on a shared machine, which stretches every thread hand-off
    out["trl_over_vista_cpu"] = cpu_ratios
    out["target"] = {"trl_best_over_vista_at_least": 2.0,
                     "met": bool(ratios.get("trl_best") is not None and ratios["trl_best"] >= 2.0)}
    return out


if __name__ == "__main__":
    sys.exit(main())
