#!/usr/bin/env bash
# The main job: a tiny VLM learns FrozenLake 4x4 from images on this CPU.
#   1. set up .venv (idempotent),
#   2. create a tiny random Qwen2.5-VL offline (vista_rl_sdk.tiny_models),
#   3. `vista train examples/frozenlake_grpo.yaml`: evaluate the untrained model on held-out seeds,
#      SFT on oracle trajectories, evaluate, GRPO on its own rollouts, evaluate,
#   4. print held-out success with 95% confidence intervals and where the run directory is.
# `bash scripts/demo.sh --compare` trains both examples/frozenlake_grpo.yaml and
# examples/frozenlake_bilevel_ppo.yaml (PPO with a value head, bi-level GAE) and prints them side by side.
# Other arguments go to `vista train` (e.g. --set trainer.steps=10).
# Each call makes new run directories (nothing earlier is overwritten).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIGS=("${VISTA_DEMO_CONFIG:-examples/frozenlake_grpo.yaml}")
if [[ "${1:-}" == "--compare" ]]; then
  shift
  CONFIGS=(examples/frozenlake_grpo.yaml examples/frozenlake_bilevel_ppo.yaml)
fi
bash scripts/setup.sh
VENV=${VISTA_VENV:-.venv}
OUT=${VISTA_DEMO_OUT:-runs/demo}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
START=$(date +%s)
mkdir -p "$OUT"
"$VENV/bin/python" - "$OUT/tiny-model" <<'PY'
import sys
from vista_rl_sdk.tiny_models import init_tiny_model
print(f"tiny model: {init_tiny_model(sys.argv[1], seed=0)}")
PY
RUNS=()
for CONFIG in "${CONFIGS[@]}"; do
  RUN="$OUT/$(date +%Y%m%d-%H%M%S)-$(basename "$CONFIG" .yaml)"
  "$VENV/bin/vista" train "$CONFIG" --set "model.path=$OUT/tiny-model" --set "output_dir=$RUN" "$@"
  RUNS+=("$RUN")
done
"$VENV/bin/python" - "$START" "${RUNS[@]}" <<'PY'
import json, sys, time
start, runs = int(sys.argv[1]), sys.argv[2:]
results = [json.load(open(f"{run}/results.json")) for run in runs]

def cell(success):
    return f"{success['value']:.3f}  [{success['ci95_low']:.3f}, {success['ci95_high']:.3f}]"

first = results[0]["evals"]
print(f"\nheld-out success on {results[0]['env']} ({first['rl']['episodes']} seeds never trained on), 95% CIs:")
rows = [("untrained", cell(first["untrained"]["success"])), ("SFT", cell(first["sft"]["success"]))]
for result in results[1:]:  # same seed and SFT config: these match the first run unless something changed
    for label, name in (("untrained", "untrained"), ("sft", "SFT")):
        if cell(result["evals"][label]["success"]) != dict(rows)[name]:
            rows.append((f"{name} ({result['estimator']} run)", cell(result["evals"][label]["success"])))
rows += [(f"RL ({result['estimator']})", cell(result["evals"]["rl"]["success"])) for result in results]
width = max(len(name) for name, _ in rows)
for name, value in rows:
    print(f"  {name:<{width}}  {value}")
for run, result in zip(runs, results):
    sft, rl = result["evals"]["sft"]["success"], result["evals"]["rl"]["success"]
    verdict = "yes" if rl["ci95_low"] > sft["ci95_high"] else "no"
    print(f"RL ({result['estimator']}) beats SFT beyond both confidence intervals: {verdict}")
    print(f"  run directory: {run} (plot: {run}/reward_success.png, metrics: {run}/metrics.jsonl)")
print(f"wall time: {time.time() - start:.0f} s")
PY
