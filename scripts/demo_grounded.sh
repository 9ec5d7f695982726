#!/usr/bin/env bash
# The grounded-reasoning job (to be run as `bash scripts/demo.sh --grounded`): ViGoRL's idea on a CPU.
# A tiny VLM learns to cite WHERE to look as (x, y), zoom there with search_coordinate and read a dot
# that the shown view cannot show (grounding/zoom-spot-v0; docs/grounded-job.md).
#   1. set up .venv (idempotent; VISTA_DEMO_SKIP_SETUP=1 skips it),
#   2. create a tiny random Qwen2.5-VL offline (vista_rl_sdk.tiny_models),
#   3. `vista train examples/grounded_zoom.yaml`: SFT on a limited number of oracle chains with (x, y)
#      points, evaluate, GRPO with ViGoRL's multi-turn grounded reward, evaluate,
#   4. scripts/demo_grounded.py: the RL model with the zoom disabled (the tool refuses), SFT and RL
#      sampled, the best constant answer; the table, the verdict (PASS/FAIL), the wall time.
#      Exits 1 when the verdict fails.
# Other arguments go to `vista train` (e.g. --set trainer.steps=10).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${VISTA_DEMO_GROUNDED_CONFIG:-examples/grounded_zoom.yaml}
if [[ -z "${VISTA_DEMO_SKIP_SETUP:-}" ]]; then
  bash scripts/setup.sh
fi
VENV=${VISTA_VENV:-.venv}
OUT=${VISTA_DEMO_OUT:-runs/demo}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
START=$(date +%s)
mkdir -p "$OUT"
"$VENV/bin/python" - "$OUT/tiny-model-grounded" <<'PY'
import sys
from vista_rl_sdk.tiny_models import init_tiny_model
print(f"tiny model: {init_tiny_model(sys.argv[1], seed=0, min_pixels=28 * 28)}")
PY
RUN="$OUT/$(date +%Y%m%d-%H%M%S)-$(basename "$CONFIG" .yaml)"
mkdir -p "$RUN"
[[ -z "${VISTA_DEMO_RUNS_FILE:-}" ]] || echo "$RUN" >> "$VISTA_DEMO_RUNS_FILE"
{
  echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc --all) cores"
  "$VENV/bin/vista" train "$CONFIG" --set "model.path=$OUT/tiny-model-grounded" --set "output_dir=$RUN" "$@"
  "$VENV/bin/python" scripts/demo_grounded.py "$RUN" --start "$START" ${VISTA_DEMO_GROUNDED_ARGS:-}
  echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc --all) cores"
} 2>&1 | tee "$RUN/demo.log"
