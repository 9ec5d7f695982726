#!/usr/bin/env bash
# The whole test suite: set-up, lint, type checks, the main test environment, then the separate
# environments for plugins whose pins conflict (each skipped only if its setup script is absent).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV=${VISTA_VENV:-.venv}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
echo "== ruff"; "$VENV/bin/ruff" check .
# Every distribution: the core, the SDK, each plugin and contrib package (the globs take in new ones).
# verl and vllm are not installed here: mypy reads their imports as Any (ignore_missing_imports), so
# vista_plugin_verl/vllm are checked against our own types only.
PACKAGES=(core/vista_rl sdk/vista_rl_sdk)
for package in plugins/*/*/vista_plugin_*/ contrib/*/vista_plugin_*/; do
  [[ "$package" == *.egg-info/ ]] || PACKAGES+=("${package%/}")  # pip can leave egg-info beside a package
done
echo "== mypy"; "$VENV/bin/mypy" "${PACKAGES[@]}"
echo "== pytest (main environment)"
"$VENV/bin/python" -m pytest tests plugins contrib "$@"
for extra in scripts/test.d/*.sh; do
  [ -f "$extra" ] || continue
  echo "== $(basename "$extra" .sh)"
  bash "$extra"
done
