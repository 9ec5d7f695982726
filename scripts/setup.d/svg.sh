#!/usr/bin/env bash
# libcairo2 from Debian, for the SVG env's renderer (cairosvg, pip, in plugins/svg/pyproject.toml,
# loads the system cairo library through cairocffi).
# Idempotent: does nothing when the library is already there. Best effort: without root (or
# passwordless sudo) and apt it only warns, and the SVG env then reports that it cannot render.
# Usage: bash scripts/setup.d/svg.sh
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }
if ldconfig -p 2>/dev/null | grep -q 'libcairo\.so\.2'; then
  exit 0
fi
if ! have apt-get; then
  echo "setup.d/svg: warning: no apt-get; install the cairo library (libcairo2) yourself for the SVG env" >&2
  exit 0
fi
if [ "$(id -u)" = "0" ]; then
  SUDO=()
elif have sudo && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "setup.d/svg: warning: need root or passwordless sudo to apt-get install libcairo2" >&2
  exit 0
fi
echo "setup.d/svg: installing libcairo2 (Debian)"
if ! { "${SUDO[@]}" apt-get update -qq \
       && DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq libcairo2 >/dev/null; }; then
  echo "setup.d/svg: warning: apt-get could not install libcairo2; the SVG env cannot render" >&2
  exit 0
fi
