#!/usr/bin/env bash
# VAGEN's reasoning-reward ablation on FrozenLake: examples/frozenlake_worldmodel.yaml trained twice,
# identical but for one flag, env.config.use_state_reward (grounding + world-modeling rewards per
# turn on / off), then held-out success of both arms side by side (95% CIs from results.json).
#   bash scripts/worldmodel_ablation.sh [--set key=value ...]   # extra overrides go to both arms
# Needs the tiny model the demo makes (scripts/demo.sh) or MODEL=path to another one.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VISTA_VENV:-.venv}
OUT=${VISTA_ABLATION_OUT:-runs/worldmodel-ablation/$(date +%Y%m%d-%H%M%S)}
MODEL=${MODEL:-runs/demo/tiny-model}
CONFIG=examples/frozenlake_worldmodel.yaml
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$OUT"
if [[ ! -f "$MODEL/config.json" ]]; then
  "$VENV/bin/python" -c "import sys; from vista_rl_sdk.tiny_models import init_tiny_model as m; m(sys.argv[1], seed=0, min_pixels=28 * 28)" "$MODEL"
fi
for FLAG in true false; do
  "$VENV/bin/vista" train "$CONFIG" --set "model.path=$MODEL" --set "output_dir=$OUT/state-reward-$FLAG" \
    --set "env.config.use_state_reward=$FLAG" "$@" 2>&1 | tee "$OUT/state-reward-$FLAG.log"
done
"$VENV/bin/python" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"{'use_state_reward':<18}{'stage':<10}held-out success [95% CI]")
for flag in ("true", "false"):
    results = json.loads((out / f"state-reward-{flag}" / "results.json").read_text())
    for label, stage in results.get("evals", {}).items():
        s = stage["success"]
        print(f"{flag:<18}{label:<10}{s['value']:.3f} [{s['ci95_low']:.3f}, {s['ci95_high']:.3f}] (n={s['n']})")
PY
