#!/usr/bin/env bash
# Set up the main development environment in .venv: CPU torch, core, sdk and every first-party
# plugin as editable installs, plus the test tools.  Idempotent: a stamp of the inputs skips work
# that is already done, so the README's commands can call it every time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${VISTA_VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}

# System packages some plugins need (Tesseract for the OCR tool).  Best effort: skipped without root.
source scripts/lib.sh
if ! command -v tesseract >/dev/null 2>&1; then
  apt_install_or_warn setup "the OCR tests will fail" tesseract-ocr
fi

stamp_inputs() {
  cat scripts/setup.sh scripts/setup.d/*.sh pyproject.toml sdk/pyproject.toml plugins/*/*/pyproject.toml contrib/*/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16
}
STAMP="$VENV/.vista-setup-$(stamp_inputs)"
if [ -f "$STAMP" ]; then
  exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# The CPU build of torch first: with it installed, every torch range below is already satisfied and
# pip never pulls the multi-GB CUDA build.
pip_install "torch==2.13.0"
EDITABLES=(-e ".[dev,torch]" -e sdk)
for plugin in plugins/*/*/ contrib/*/; do
  [ -f "$plugin/pyproject.toml" ] && EDITABLES+=(-e "$plugin")
done
pip_install "${EDITABLES[@]}" "torch==2.13.0"
"$VENV/bin/python" -c "import vista_rl, vista_rl_sdk, vista_plugin_local" >/dev/null
# Extra fixes other issues need (torchvision guard etc.) hook in here.
for fix in scripts/setup.d/*.sh; do
  [ -f "$fix" ] && VENV="$VENV" bash "$fix"
done
rm -f "$VENV"/.vista-setup-*
touch "$STAMP"
echo "setup: environment ready in $VENV"
