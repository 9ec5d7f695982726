#!/usr/bin/env bash
# libcairo2 from Debian, for the SVG env's renderer (cairosvg, pip, in plugins/envs/svg/pyproject.toml,
# loads the system cairo library through cairocffi).
# Idempotent: does nothing when the library is already there. Best effort: without root (or
# passwordless sudo) and apt it only warns, and the SVG env then reports that it cannot render.
# Usage: bash scripts/setup.d/svg.sh
set -euo pipefail

source "$(dirname "$0")/../lib.sh"
if ldconfig -p 2>/dev/null | grep -q 'libcairo\.so\.2'; then
  exit 0
fi
apt_install_or_warn setup.d/svg "the SVG env cannot render" libcairo2
