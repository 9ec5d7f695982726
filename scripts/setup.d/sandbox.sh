#!/usr/bin/env bash
# The python tool's OS-level sandbox: bubblewrap (namespaces), libseccomp (the seccomp filter, loaded
# through ctypes) and setpriv (util-linux; drops root to nobody inside the sandbox).
#
# Why: the tool refuses to run model-written code without this isolation (see
# plugins/tools/tools/README.md, "The python sandbox"), unless its config says isolation="process".
# Idempotent: installs only what is missing; without root or apt it says what to install and goes on.
# Usage: bash scripts/setup.d/sandbox.sh   (scripts/setup.sh runs every scripts/setup.d/*.sh)
set -euo pipefail

missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || missing+=(libseccomp2)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup.d/sandbox: installing ${missing[*]} (Debian)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) \
    || echo "setup.d/sandbox: warning: could not install ${missing[*]}; the python tool will refuse to run" >&2
else
  echo "setup.d/sandbox: warning: ${missing[*]} missing and cannot be installed here (needs root + apt);" \
       "the python tool will refuse to run unless configured with isolation=\"process\"" >&2
fi
