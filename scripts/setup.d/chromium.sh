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

source "$(dirname "$0")/../lib.sh"
have() { command -v "$1" >/dev/null 2>&1; }
if { have chromium || have chromium-browser; } && have chromedriver; then
  exit 0
fi
apt_install_or_warn setup.d/chromium "the browser tests will skip" chromium chromium-driver
have chromium || exit 0
chromium --version
