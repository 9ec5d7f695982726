#!/usr/bin/env bash
# Build the sdist and wheel of every distribution in the repository (core, SDK, plugins/, contrib/)
# into one wheelhouse, then `twine check` them all.  Usage: bash scripts/build-dists.sh [OUT_DIR]
# (default dist/).  Publishing is then `twine upload OUT_DIR/*` (see CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mkdir -p "${1:-dist}" && cd "${1:-dist}" && pwd)
VENV=${VISTA_VENV:-.venv}
source scripts/lib.sh
"$VENV/bin/python" -c "import build, twine, wheel" 2>/dev/null || pip_install build twine wheel
DISTS=(. sdk)
for dir in plugins/*/*/ contrib/*/; do
  [ -f "$dir/pyproject.toml" ] && DISTS+=("${dir%/}")
done
for dir in "${DISTS[@]}"; do
  # --no-isolation: build with the venv's setuptools instead of downloading a fresh build env per dist.
  "$VENV/bin/python" -m build --no-isolation --sdist --wheel --outdir "$OUT" "$dir" >/dev/null 2>"$OUT/.build.log" \
    || { cat "$OUT/.build.log" >&2; echo "build-dists: $dir failed" >&2; exit 1; }
  rm -rf "$dir"/build "$dir"/*.egg-info "$dir"/core/*.egg-info
done
rm -f "$OUT/.build.log"
"$VENV/bin/python" -m twine check --strict "$OUT"/*
echo "build-dists: ${#DISTS[@]} distributions in $OUT"
