#!/usr/bin/env bash
# The verl test environment, .venvs/verl: verl pins transformers<5.11, which conflicts with other
# plugins' pins, so verl gets its own venv with only core and the sdk (no other plugins) installed.
#
# Idempotent: a stamp of this script's inputs skips the install when nothing changed.  Then runs
# every verl test folder that exists (tests/verl, plugins/engines/verl/tests, ...); add folders to
# VERL_TEST_PATHS below.  Usage:
#   bash scripts/test.d/verl.sh            # build if needed, run the tests
#   bash scripts/test.d/verl.sh --setup    # build only (e.g. for benchmarks/estimators.py)
#   bash scripts/test.d/verl.sh -k gae     # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
VENV=${VISTA_VERL_VENV:-$ROOT/.venvs/verl}
PY=${PYTHON:-python3}
# verl 0.9.1 is the tested version; if it ever stops installing, the newest 0.9.x is tried.
VERL_SPEC=${VISTA_VERL_SPEC:-verl==0.9.1}
VERL_FALLBACK_SPEC="verl>=0.9,<0.10"
VERL_TEST_PATHS=(tests/verl plugins/engines/verl/tests)

stamp_inputs() {
  { cat scripts/test.d/verl.sh pyproject.toml sdk/pyproject.toml plugins/engines/verl/pyproject.toml; echo "$VERL_SPEC"; } \
    | sha256sum | cut -c1-16
}
STAMP="$VENV/.vista-verl-$(stamp_inputs)"

if [ ! -f "$STAMP" ]; then
  echo "verl: building $VENV"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  source scripts/lib.sh
  # The CPU torch first, and pinned in every later call, so nothing can pull a CUDA build.
  pip_install "torch==2.13.0"
  if ! pip_install "$VERL_SPEC" "torch==2.13.0"; then
    echo "verl: $VERL_SPEC did not install; trying $VERL_FALLBACK_SPEC" >&2
    pip_install "$VERL_FALLBACK_SPEC" "torch==2.13.0"
  fi
  # Core and the SDK, not every plugin: some plugins' pins conflict with verl's (the local engine,
  # vista-plugin-local, needs transformers>=5.16; `.[dev]` is torch-free and pulls no engine).
  pip_install -e ".[dev]" -e sdk "torch==2.13.0"
  # The verl plugin with its [verl] extra, as docs/cluster.md installs it (TransferQueue for verl's default
  # trainer; cachetools/uvicorn/fastapi, which verl's agent loop imports without declaring them), + oddshape,
  # an image env for its tests (torchvision for the Qwen2.5-VL processor).
  pip_install -e "plugins/engines/verl[verl]" -e plugins/envs/oddshape "torch==2.13.0"
  # TransferQueue's wheel also ships top-level tests/recipe/scripts/tutorial folders; they would shadow
  # this repository's tests package, so only transfer_queue is kept.
  SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for folder in tests recipe scripts tutorial; do
    if [ -d "$SITE/$folder" ] && grep -qs "^$folder/" "$SITE"/transferqueue-*.dist-info/RECORD; then
      rm -rf "${SITE:?}/$folder"
    fi
  done
  # The tool env the parity test runs through verl's agent-loop worker (visual_search/zoom-small-v0,
  # its crop_zoom tool) and what it depends on (the scene kit: its marker and shapes).
  pip_install -e plugins/judges/judges -e plugins/envs/datasets -e plugins/envs/vqa -e plugins/tools/tools \
    -e plugins/kits/scenekit -e plugins/envs/visual_search "torch==2.13.0"
  # The main job's env (FrozenLake, on the game kit): its examples dry-run here with verl's own loader,
  # and scripts/verl_cpu_step/main_job.sh trains it on verl.
  pip_install -e plugins/kits/gamekit -e plugins/envs/frozenlake "torch==2.13.0"
  VENV="$VENV" bash scripts/setup.d/torchvision.sh
  "$VENV/bin/python" -c "import verl.trainer.ppo.core_algos, transfer_queue, vista_rl, vista_rl_sdk, vista_plugin_visual_search" >/dev/null
  rm -f "$VENV"/.vista-verl-*
  touch "$STAMP"
  echo "verl: environment ready ($("$VENV/bin/python" -c 'import verl; print(verl.__version__)'))"
fi

if [ "${1:-}" = "--setup" ]; then
  exit 0
fi

PATHS=()
for path in "${VERL_TEST_PATHS[@]}"; do
  [ -d "$path" ] && PATHS+=("$path")
done
if [ ${#PATHS[@]} -eq 0 ]; then
  echo "verl: no test folders found"
  exit 0
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# The main conftest/pytest plugins still load; -p no:cacheprovider keeps the shared cache clean.
"$VENV/bin/python" -m pytest -p no:cacheprovider "${PATHS[@]}" "$@"
