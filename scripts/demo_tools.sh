#!/usr/bin/env bash
# The tool-use main job (to be run as `bash scripts/demo.sh --tools`): a tiny VLM learns to zoom
# before it answers, on a task whose answer is not in the shown image at all.
#   1. set up .venv (idempotent; VISTA_DEMO_SKIP_SETUP=1 skips it),
#   2. create a tiny random Qwen2.5-VL offline (vista_rl_sdk.tiny_models),
#   3. `vista train examples/visual_search_tools.yaml`: evaluate the untrained model on held-out
#      seeds, SFT on oracle tool trajectories, evaluate, GRPO with the crop_zoom tool, evaluate,
#   4. scripts/demo_tools.py: the RL model again with the tool disabled (greedy and sampled), sampled
#      with the tool, and the best constant answer; the table, a verdict line, and where the viewer
#      (tool turns with their zoomed images) is. Exits 1 when the verdict fails.
# Other arguments go to `vista train` (e.g. --set trainer.steps=10).
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${VISTA_DEMO_TOOLS_CONFIG:-examples/visual_search_tools.yaml}
if [[ -z "${VISTA_DEMO_SKIP_SETUP:-}" ]]; then
  bash scripts/setup.sh
fi
VENV=${VISTA_VENV:-.venv}
OUT=${VISTA_DEMO_OUT:-runs/demo}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
START=$(date +%s)
mkdir -p "$OUT"
"$VENV/bin/python" - "$OUT/tiny-model-tools" <<'PY'
import sys
from vista_rl_sdk.tiny_models import init_tiny_model
print(f"tiny model: {init_tiny_model(sys.argv[1], seed=0)}")
PY
RUN="$OUT/$(date +%Y%m%d-%H%M%S)-$(basename "$CONFIG" .yaml)"
[[ -z "${VISTA_DEMO_RUNS_FILE:-}" ]] || echo "$RUN" >> "$VISTA_DEMO_RUNS_FILE"
"$VENV/bin/vista" train "$CONFIG" --set "model.path=$OUT/tiny-model-tools" --set "output_dir=$RUN" "$@"
"$VENV/bin/python" scripts/demo_tools.py "$RUN" --start "$START" ${VISTA_DEMO_TOOLS_ARGS:-}
