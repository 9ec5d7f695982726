"""GRPO step time of the local engine (split rollout / log-prob / update) against TRL's GRPOTrainer.

    python benchmarks/train.py [--tiny] [--steps 5] [--repeats 4] [--trl-python /tmp/trlvenv/bin/python]

TRL is the anchor, at its fastest comparable setting: gradient checkpointing off (TRL turns it on
by default, and then recomputes activations that we do not), no reference model (beta 0), no
vLLM.  TRL's pins conflict with the dev environment, so it runs in its own virtual environment
(pass its python with --trl-python or VISTA_TRL_PYTHON; without one the TRL half is reported as
skipped).  Both sides: the tiny Qwen2.5-VL from ``vista_rl_sdk.tiny_models``, the oddshape env's
one-turn task (image + question, reward 1 for the right cell), B seeds x G samples per step, the
same max new tokens, temperature 1, fp32, CPU.  The sides alternate run by run (ours, TRL, TRL,
ours, ...); each run's first step is a warm-up and left out; the JSON gives the median and min-max
of all measured steps of each side, the versions of both, and TRL-over-ours of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _bench import dist_versions, machine, ratio, summarize

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
        self.times, self.start = [], None
    def on_step_begin(self, *a, **k):
        self.start = time.perf_counter()
    def on_step_end(self, *a, **k):
        self.times.append(time.perf_counter() - self.start)

processor = AutoProcessor.from_pretrained(spec["model"])
model = AutoModelForImageTextToText.from_pretrained(spec["model"], dtype=torch.float32)
batch = spec["seeds_per_step"] * spec["group_size"]
args = GRPOConfig(output_dir=spec["out"], per_device_train_batch_size=batch, num_generations=spec["group_size"],
                  max_completion_length=spec["max_tokens"], max_steps=spec["steps"], learning_rate=1e-4,
                  temperature=1.0, use_cpu=True, bf16=False, fp16=False, report_to=[], logging_steps=1,
                  save_strategy="no", gradient_accumulation_steps=1, beta=0.0, seed=0, dataloader_num_workers=0,
                  gradient_checkpointing=False)
timer = Timer()
trainer = GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=dataset, processing_class=processor,
                      callbacks=[timer])
trainer.train()
# VmHWM, not ru_maxrss: ru_maxrss survives fork+exec, so a child would report its parent's peak.
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
import transformers, trl
print("TRLJSON " + json.dumps({"step_times_s": timer.times, "peak_rss_mb": hwm / 1024,
                               "gradient_checkpointing": bool(args.gradient_checkpointing),
                               "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                                            "torch": torch.__version__}}))
'''


def run_vista(model_dir: Path, work: Path, steps: int, seeds_per_step: int, group_size: int,
              max_tokens: int, run_name: str = "vista-run") -> dict[str, Any]:
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
    })
    from rich.console import Console

    LocalEngine(run, console=Console(file=sys.stderr)).run()  # stdout carries only the JSON
    rows = [row for row in read_jsonl(work / run_name / "metrics.jsonl") if row.get("stage") == "rl"][1:]

    def avg(key: str) -> float:
        return sum(float(row[key]) for row in rows) / len(rows)

    return {
        "status": "ok", "step_times_s": [float(row["time_step_s"]) for row in rows],
        "step_s": avg("time_step_s"), "rollout_s": avg("time_rollout_s"), "logprob_s": avg("time_logprob_s"),
        "update_s": avg("time_update_s"), "tokens_per_s": avg("tokens_per_s"),
        "gen_tokens_per_s": avg("gen_tokens_per_s"), "sequence_tokens_mean": avg("sequence_tokens_mean"),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_trl(trl_python: str, model_dir: Path, work: Path, steps: int, seeds_per_step: int, group_size: int,
            max_tokens: int, run_name: str = "trl-out") -> dict[str, Any]:
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
            "seeds_per_step": seeds_per_step, "group_size": group_size, "max_tokens": max_tokens}
    (work / "spec.json").write_text(json.dumps(spec))
    (work / "trl_grpo.py").write_text(TRL_SCRIPT)
    started = time.perf_counter()
    proc = subprocess.run([trl_python, str(work / "trl_grpo.py"), str(work / "spec.json")], capture_output=True,
                          text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"}, timeout=900)
    wall = time.perf_counter() - started
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("TRLJSON ")), None)
    if proc.returncode != 0 or line is None:
        return {"status": "failed", "returncode": proc.returncode, "stderr_tail": proc.stderr[-1500:]}
    data = json.loads(line[len("TRLJSON "):])
    times = data["step_times_s"][1:] or data["step_times_s"]
    return {"status": "ok", "step_times_s": times, "step_s": sum(times) / len(times),
            "peak_rss_mb": data["peak_rss_mb"], "wall_s": wall, "versions": data["versions"],
            "gradient_checkpointing": data["gradient_checkpointing"]}


def trl_version(trl_python: str) -> dict[str, Any]:
    """Versions in the TRL venv (for the report even when a run fails)."""
    code = ("import json\nfrom importlib import metadata as m\nout = {}\nfor n in ('trl', 'transformers', 'torch'):\n"
            "    try:\n        out[n] = m.version(n)\n    except m.PackageNotFoundError:\n        out[n] = None\n"
            "print(json.dumps(out))")
    proc = subprocess.run([trl_python, "-c", code], capture_output=True, text=True, timeout=120)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2 steps of 2 seeds x 2, 1 repeat (for tests)")
    parser.add_argument("--steps", type=int, default=5, help="steps per run; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=4, help="runs per side, alternating")
    parser.add_argument("--seeds-per-step", type=int, default=8)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--trl-python", default=os.environ.get("VISTA_TRL_PYTHON", "/tmp/trlvenv/bin/python"))
    args = parser.parse_args()
    if args.tiny:
        args.steps, args.repeats, args.seeds_per_step, args.group_size, args.max_tokens = 2, 1, 2, 2, 4
    import torch

    from vista_rl_sdk.tiny_models import init_tiny_model

    work = Path(tempfile.mkdtemp(prefix="vista-bench-train-"))
    have_trl = Path(args.trl_python).exists()
    try:
        model_dir = init_tiny_model(work / "model", seed=0)
        shape = (args.steps, args.seeds_per_step, args.group_size, args.max_tokens)
        result: dict[str, Any] = {
            "benchmark": "grpo_step", "machine": machine(), "env": ENV["id"], "torch_threads": torch.get_num_threads(),
            "seeds_per_step": args.seeds_per_step, "group_size": args.group_size, "max_tokens": args.max_tokens,
            "steps_per_run": args.steps, "measured_steps_per_run": args.steps - 1, "repeats": args.repeats,
            "anchor": "trl GRPOTrainer (gradient_checkpointing=False, beta=0)" if have_trl
            else f"skipped: no TRL environment at {args.trl_python}",
            "versions": {"ours": {**dist_versions("vista-rl", "vista-plugin-local", "transformers"),
                                  "torch": torch.__version__},
                         "anchor": trl_version(args.trl_python) if have_trl else None},
        }
        vista_runs: list[dict[str, Any]] = []
        trl_runs: list[dict[str, Any]] = []
        for r in range(args.repeats):
            order = ("vista", "trl") if r % 2 == 0 else ("trl", "vista")
            for side in order:
                if side == "vista":
                    vista_runs.append(run_vista(model_dir, work, *shape, run_name=f"vista-run-{r}"))
                elif have_trl:
                    trl_runs.append(run_trl(args.trl_python, model_dir, work, *shape, run_name=f"trl-out-{r}"))
        vista_steps = [t for run in vista_runs for t in run["step_times_s"]]
        result["vista"] = {"step": summarize(vista_steps), "runs": vista_runs}
        if not have_trl:
            result["trl"] = {"status": "skipped", "reason": f"no TRL environment at {args.trl_python}"}
        else:
            ok = [run for run in trl_runs if run.get("status") == "ok"]
            trl_steps = [t for run in ok for t in run["step_times_s"]]
            result["trl"] = {"status": "ok" if ok else "failed", "step": summarize(trl_steps), "runs": trl_runs}
            if ok:
                result["trl_step_over_vista_step"] = ratio(result["trl"]["step"], result["vista"]["step"])
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
