# Shell helpers shared by scripts/setup.sh and scripts/test.d/*.sh (source this file; set $VENV).

# pip install into $VENV, quiet, without the warnings about absent local index folders (and any
# further patterns in $PIP_QUIET_EXTRA, one per line); keeps pip's exit status.
pip_install() {
  local patterns=(-e "is ignored: it is neither")
  local extra
  while IFS= read -r extra; do
    [ -n "$extra" ] && patterns+=(-e "$extra")
  done <<< "${PIP_QUIET_EXTRA:-}"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "${patterns[@]}" || true; }
  return "${PIPESTATUS[0]}"
}

# Best-effort Debian packages: apt_install_or_warn TAG CONSEQUENCE PACKAGE...
# Installs with apt-get as root or with passwordless sudo; otherwise (no apt-get, no rights, or apt
# fails) prints "TAG: warning: ... CONSEQUENCE" and still returns 0, so a set-up step never stops
# the whole set-up for an optional system library.
apt_install_or_warn() {
  local tag=$1 consequence=$2
  shift 2
  local sudo=()
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$tag: warning: no apt-get; install $* yourself ($consequence)" >&2
    return 0
  fi
  if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      echo "$tag: warning: need root or passwordless sudo to apt-get install $* ($consequence)" >&2
      return 0
    fi
  fi
  echo "$tag: installing $* (Debian)"
  if ! { "${sudo[@]}" apt-get update -qq \
         && DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "$@" >/dev/null; }; then
    echo "$tag: warning: apt-get could not install $* ($consequence)" >&2
  fi
  return 0
}
