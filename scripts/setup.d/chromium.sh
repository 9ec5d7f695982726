#!/usr/bin/env bash
# Chromium and its chromedriver from Debian, for the viewer's browser tests
# (tests/test_viewer_browser.py drives them headless through Selenium).
#
# Why Debian's: Playwright's and Selenium Manager's own browser downloads are not reachable here,
# and the system packages are. Idempotent: does nothing when both are already on PATH. Best effort
# like the Tesseract step in setup.sh: without root (or passwordless sudo) and apt it only warns,
# and the browser tests then skip with that reason.
# Usage: bash scripts/setup.d/chromium.sh
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }
if { have chromium || have chromium-browser; } && have chromedriver; then
  exit 0
fi
if ! have apt-get; then
  echo "setup.d/chromium: warning: no apt-get; install Chromium and chromedriver yourself for the browser tests" >&2
  exit 0
fi
if [ "$(id -u)" = "0" ]; then
  SUDO=()
elif have sudo && sudo -n true 2>/dev/null; then
  SUDO=(sudo -n)
else
  echo "setup.d/chromium: warning: need root or passwordless sudo to apt-get install chromium chromium-driver;" \
       "the browser tests will skip" >&2
  exit 0
fi
echo "setup.d/chromium: installing chromium and chromium-driver (Debian)"
if ! { "${SUDO[@]}" apt-get update -qq \
       && DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq chromium chromium-driver >/dev/null; }; then
  echo "setup.d/chromium: warning: apt-get could not install chromium chromium-driver; the browser tests will skip" >&2
  exit 0
fi
chromium --version
