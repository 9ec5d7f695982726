#!/usr/bin/env bash
# The main job with its RL stage on verl, on one Linux box with one or more NVIDIA GPUs and internet:
#   bash scripts/gpu-smoke.sh [--set key=value ...]      # extra overrides go to both stages
#
#   1. .venv (scripts/setup.sh: the local engine, CPU torch) and .venvs/verl-gpu (verl[vllm]==0.9.1:
#      CUDA torch, vLLM and the transformers verl pins, plus core, the sdk, the verl and frozenlake plugins);
#   2. the tiny Qwen2.5-VL the main job is tuned for (as scripts/demo.sh makes it);
#   3. the SFT stage with the local engine (`vista train --engine local ... --set trainer.steps=0`): the
#      verl engine has none, so the RL stage starts from RUN/sft/models/sft;
#   4. the RL stage with `vista train --engine verl` on every GPU (trainer.n_gpus_per_node);
#   5. `python -m vista_plugin_local.main_job` on a run directory assembled from both stages
#      (scripts/gpu_smoke_report.py): the same table and verdict as scripts/demo.sh.
#
# The config is examples/frozenlake_grpo.yaml with the changes `vista train --engine verl` names for it
# (plugins/engines/verl/README.md, "What the verl engine refuses"), applied to BOTH stages so that SFT and RL
# train the same policy: whole conversations (rollout.window_size: null) instead of one sequence per
# turn with the current map only, the map rendered at 28x28 by the env (env.config.tile_size: 7)
# instead of resized by the episode driver (rollout.image_size), and, while verl's agent loop
# does not cap a reply (config.loop_applies_sampling), rollout.sampling.max_tokens at the episode's
# token budget.  So this is the nearest config verl trains exactly, not the CPU main job itself.
#
# Environment: VISTA_SMOKE_OUT (runs/gpu-smoke), VISTA_SMOKE_CONFIG (examples/frozenlake_grpo.yaml),
# VISTA_SMOKE_GPUS (all of nvidia-smi -L), VISTA_SMOKE_VERL_VENV (.venvs/verl-gpu), VISTA_SMOKE_SKIP_SETUP=1.
# Exit status: main_job's (0 when the verdict holds, 1 when it fails), or the failing stage's.
set -euo pipefail
cd "$(dirname "$0")/.."
CONFIG=${VISTA_SMOKE_CONFIG:-examples/frozenlake_grpo.yaml}
OUT=${VISTA_SMOKE_OUT:-runs/gpu-smoke}/$(date +%Y%m%d-%H%M%S)
VENV=.venv
VERL_VENV=${VISTA_SMOKE_VERL_VENV:-.venvs/verl-gpu}
GPUS=${VISTA_SMOKE_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}
if [[ -z "$GPUS" || "$GPUS" -lt 1 ]]; then
  echo "gpu-smoke: no NVIDIA GPU found (nvidia-smi -L); set VISTA_SMOKE_GPUS to override" >&2
  exit 2
fi
# The prompt is the system prompt and the first 28x28 map; the response is every turn (6 replies of a
# few tokens and 5 observations of about 20 tokens each).
PROMPT_LEN=512
RESPONSE_LEN=256

if [[ -z "${VISTA_SMOKE_SKIP_SETUP:-}" ]]; then
  bash scripts/setup.sh
  if [[ ! -x "$VERL_VENV/bin/python" ]]; then
    python3 -m venv "$VERL_VENV"
  fi
  "$VERL_VENV/bin/python" -m pip install -q --upgrade pip
  # verl's own GPU stack (torch 2.11 CUDA, vLLM 0.24.0, transformers 5.9.0) and its verl-core extra
  # (TransferQueue: the default trainer, trainer.use_v1, imports it); then vista without other plugins.
  "$VERL_VENV/bin/python" -m pip install -q "verl[vllm]==0.9.1" cachetools uvicorn fastapi
  "$VERL_VENV/bin/python" -m pip install -q -e . -e sdk -e "plugins/engines/verl[verl]" -e plugins/kits/gamekit \
    -e plugins/envs/frozenlake "verl[vllm]==0.9.1"
fi
VERL_PY=$(cd "$VERL_VENV" && pwd)/bin/python
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-smoke.log") 2>&1

"$VENV/bin/python" - "$OUT/tiny-model" <<'PY'
import sys
from vista_rl_sdk.tiny_models import init_tiny_model
print(f"tiny model: {init_tiny_model(sys.argv[1], seed=0, min_pixels=28 * 28)}")
PY

CHANGES=(--set rollout.window_size=null --set rollout.image_size=null --set env.config.tile_size=7)
if [[ "$("$VERL_PY" -c 'from vista_plugin_verl.config import loop_applies_sampling as f; print(f())')" != True ]]; then
  CHANGES+=(--set "rollout.sampling.max_tokens=$RESPONSE_LEN")
fi
START=$(date +%s)
echo "== 1/3 SFT stage (local engine): $OUT/sft"
"$VENV/bin/vista" train "$CONFIG" --engine local --set "model.path=$OUT/tiny-model" --set "output_dir=$OUT/sft" \
  --set trainer.steps=0 "${CHANGES[@]}" "$@"

# verl's FSDP actor defaults to flash_attention_2 and remove-padding (the flash-attn package, which
# verl[vllm] does not install): sdpa and padded batches instead; a Hugging Face copy of each checkpoint
# (hf_model) for the report
echo "== 2/3 RL stage (verl, $GPUS GPU(s)): $OUT/rl"
"$VERL_VENV/bin/vista" train "$CONFIG" --engine verl --set "model.path=$OUT/sft/models/sft" \
  --set "output_dir=$OUT/rl" --set sft.steps=0 "${CHANGES[@]}" \
  --set "engine_config.verl.python=$VERL_PY" \
  --set "engine_config.verl.cluster.n_gpus_per_node=$GPUS" \
  --set "engine_config.verl.cluster.max_prompt_length=$PROMPT_LEN" \
  --set "engine_config.verl.cluster.max_response_length=$RESPONSE_LEN" \
  --set 'engine_config.verl.overrides=["actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]","actor_rollout_ref.model.use_remove_padding=false","+actor_rollout_ref.model.override_config.attn_implementation=sdpa"]' \
  "$@"
TRAINED=$(date +%s)

echo "== 3/3 report"
if ! FINAL=$("$VENV/bin/python" scripts/gpu_smoke_report.py final-model "$OUT/rl"); then
  STEP_DIR=$("$VENV/bin/python" -c "import sys; sys.path.insert(0, 'scripts'); import gpu_smoke_report as r; \
print(r.latest_step_dir(r.Path('$OUT/rl/checkpoints')))")
  FINAL=$OUT/rl/models/final
  "$VERL_PY" -m verl.model_merger merge --backend fsdp --local_dir "$STEP_DIR/actor" --target_dir "$FINAL"
fi
"$VENV/bin/python" scripts/gpu_smoke_report.py assemble "$OUT/sft" "$OUT/rl" "$FINAL" "$OUT/report"
set +e
"$VENV/bin/python" -m vista_plugin_local.main_job "$OUT/report"
CODE=$?
set -e
echo "runs: SFT $OUT/sft, RL (verl) $OUT/rl (verl_config.yaml, verl_metrics.jsonl, tensorboard/, checkpoints/), report $OUT/report"
echo "wall time: training $((TRAINED - START)) s, report $(($(date +%s) - TRAINED)) s"
exit $CODE
