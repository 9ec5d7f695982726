#!/usr/bin/env bash
# The main job.  Until the training engine lands, it evaluates the example env with a scripted
# oracle policy and a constant (always "5") policy, so the numbers show the eval path end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${VISTA_VENV:-.venv}
OUT=${VISTA_DEMO_OUT:-runs/demo}
mkdir -p "$OUT"
"$VENV/bin/vista" eval --env oddshape/odd-colour-v0 --model scripted:oracle --episodes 50 --out "$OUT/oracle"
echo '["<think>guess</think><answer>5</answer>"]' > "$OUT/constant.json"
"$VENV/bin/vista" eval --env oddshape/odd-colour-v0 --model "scripted:$OUT/constant.json" --episodes 50 --out "$OUT/constant"
