#!/usr/bin/env bash
# The main job: a tiny VLM learns FrozenLake 4x4 from images on this CPU.
#   1. set up .venv (idempotent),
#   2. create a tiny random Qwen2.5-VL offline (vista_sdk.tiny_models),
#   3. `vista train examples/frozenlake_grpo.yaml`: evaluate the untrained model on held-out seeds,
#      SFT on oracle trajectories, evaluate, GRPO on its own rollouts, evaluate,
#   4. print held-out success with 95% confidence intervals and where the run directory is.
# Each call makes a new run directory (nothing earlier is overwritten).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${VISTA_VENV:-.venv}
OUT=${VISTA_DEMO_OUT:-runs/demo}
CONFIG=${VISTA_DEMO_CONFIG:-examples/frozenlake_grpo.yaml}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
START=$(date +%s)
RUN="$OUT/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
"$VENV/bin/python" - "$OUT/tiny-model" <<'PY'
import sys
from vista_sdk.tiny_models import init_tiny_model
print(f"tiny model: {init_tiny_model(sys.argv[1], seed=0)}")
PY
"$VENV/bin/vista" train "$CONFIG" --set "model.path=$OUT/tiny-model" --set "output_dir=$RUN" "$@"
"$VENV/bin/python" - "$RUN" "$START" <<'PY'
import json, sys, time
run, start = sys.argv[1], int(sys.argv[2])
results = json.load(open(f"{run}/results.json"))
evals = results["evals"]
print(f"\nheld-out success on {results['env']} ({evals['rl']['episodes']} seeds never trained on), 95% CIs:")
for label, name in (("untrained", "untrained"), ("sft", "SFT"), ("rl", "RL (" + results["estimator"] + ")")):
    s = evals[label]["success"]
    print(f"  {name:<12} {s['value']:.3f}  [{s['ci95_low']:.3f}, {s['ci95_high']:.3f}]")
sft, rl = evals["sft"]["success"], evals["rl"]["success"]
verdict = "yes" if rl["ci95_low"] > sft["ci95_high"] else "no"
print(f"RL beats SFT beyond both confidence intervals: {verdict}")
print(f"run directory: {run} (plot: {run}/reward_success.png, metrics: {run}/metrics.jsonl)")
print(f"wall time: {time.time() - start:.0f} s")
PY
