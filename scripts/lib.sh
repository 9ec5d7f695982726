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
