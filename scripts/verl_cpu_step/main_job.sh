#!/usr/bin/env bash
# The main job (examples/frozenlake_grpo.yaml, its SFT stage included) under both engines on this CPU,
# the same config, seeds and steps: the mean training reward of every RL step side by side
# (docs/cluster.md has the table this made).
#
#   bash scripts/verl_cpu_step/main_job.sh [RUN_DIR] [RL_STEPS]     # defaults /tmp/verl-main-job, 20
#
# verl: scripts/verl_cpu_step/run.sh with the main job's config (verl's SFT trainer, then GRPO with
# per-turn rows on verl's v1 trainer, vLLM's CPU server); the per-step reward comes from the agent
# loop's record of every episode (RUN_DIR/verl/run/episodes.jsonl).  local: `vista train` with the
# same config (RUN_DIR/local, metrics.jsonl).  Both train on the same seeds per step
# (vista_rl.step_seeds) from the same tiny model.  Held-out evaluation is left out of both (eval.*:
# this compares training); VERL_CPU_TIMEOUT bounds the verl run (default 3600 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:-/tmp/verl-main-job}
STEPS=${2:-20}
CONFIG=examples/frozenlake_grpo.yaml
# fp32 for both: what the local engine's precision auto is on a CPU (verl's auto is its GPU default, bf16)
SET="trainer.steps=$STEPS eval.at_start=false eval.after_sft=false eval.seeds.count=8 trainer.loggers=[jsonl]
engine_config.local.precision=fp32"
mkdir -p "$RUN"
PY=.venv/bin/python
[ -x "$PY" ] || { echo "needs the main environment: bash scripts/setup.sh" >&2; exit 2; }
[ -f "$RUN/tiny-model/config.json" ] || "$PY" -c \
  "from vista_rl_sdk.tiny_models import init_tiny_model as m; m('$RUN/tiny-model', min_pixels=28*28)"

START=$(date +%s)
mkdir -p "$RUN/verl"
ln -sfn "$(cd "$RUN" && pwd)/tiny-model" "$RUN/verl/tiny-model"
VERL_CPU_CONFIG=$CONFIG VERL_CPU_SET="$SET model.path=$RUN/tiny-model" VERL_CPU_TIMEOUT=${VERL_CPU_TIMEOUT:-3600} \
  bash scripts/verl_cpu_step/run.sh "$RUN/verl"
VERL_S=$(( $(date +%s) - START ))

START=$(date +%s)
rm -rf "$RUN/local"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} .venv/bin/vista train "$CONFIG" --set model.path="$RUN/tiny-model" \
  --set output_dir="$RUN/local" $(printf -- '--set %s ' $SET) > "$RUN/local.log" 2>&1 \
  || { tail -20 "$RUN/local.log" >&2; echo "main job: the local run failed (log $RUN/local.log)" >&2; exit 1; }
LOCAL_S=$(( $(date +%s) - START ))

"$PY" - "$RUN" "$STEPS" "$VERL_S" "$LOCAL_S" <<'PY'
import json, statistics, sys
from collections import defaultdict
from pathlib import Path

run, steps, verl_s, local_s = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
local = {row["step"]: row for row in map(json.loads, (run / "local" / "metrics.jsonl").read_text().splitlines())
         if row.get("stage") == "rl"}
episodes = defaultdict(list)
for line in (run / "verl" / "run" / "episodes.jsonl").read_text().splitlines():
    row = json.loads(line)
    # the weight version each rollout was generated with: 0 for RL step 1; failed episodes count, as locally
    if row["split"] == "train" and row["global_steps"] is not None:
        episodes[int(row["global_steps"]) + 1].append(row)
print(f"| RL step | local reward (success) | verl reward (success) |")
print("|---|---|---|")
both = []
for step in range(1, steps + 1):
    mine = local.get(step)
    theirs = episodes.get(step, [])
    left = f"{mine['reward_mean']:.3f} ({mine['success_rate']:.2f})" if mine else "-"
    right = (f"{statistics.mean(r['reward'] for r in theirs):.3f} "
             f"({statistics.mean(float(r['success']) for r in theirs):.2f})" if theirs else "-")
    if mine and theirs:
        both.append((mine["reward_mean"], statistics.mean(r["reward"] for r in theirs)))
    print(f"| {step} | {left} | {right} |")
if both:
    print(f"| mean | {statistics.mean(a for a, _ in both):.3f} | {statistics.mean(b for _, b in both):.3f} |")
print(f"\nwall clock: verl {verl_s} s (SFT + RL + export + eval), local {local_s} s (SFT + RL + eval)")
PY
