#!/usr/bin/env bash
# torchvision beside the CPU build of torch.
#
# Why: transformers' Qwen2-VL / Qwen2.5-VL processors need a video processor, which needs
# torchvision.  PyPI's Linux torchvision wheels are CUDA builds; beside CPU torch their compiled ops
# are missing and `import torchvision` dies on two unguarded `register_fake("torchvision::nms")` /
# `("torchvision::qnms")` decorators in torchvision/_meta_registrations.py.  Everything transformers
# uses (transforms.v2.functional) is plain torch, so guarding those two decorators with
# `torchvision.extension._has_ops()` is enough.  Idempotent: installs only when missing, patches
# only unpatched files.  Usage: VENV=/path/to/venv bash scripts/setup.d/torchvision.sh
set -euo pipefail
VENV=${VENV:?set VENV to the virtual environment to fix}
PY="$VENV/bin/python"
TORCHVISION_VERSION=${TORCHVISION_VERSION:-0.28.0}

installed=$("$PY" -m pip show torchvision 2>/dev/null | sed -n 's/^Version: //p' || true)
if [ -z "$installed" ]; then
  echo "setup.d/torchvision: installing torchvision==$TORCHVISION_VERSION (--no-deps, keeps CPU torch)"
  "$PY" -m pip install -q --disable-pip-version-check --no-deps "torchvision==$TORCHVISION_VERSION" 2>&1 \
    | { grep -v "is ignored: it is neither" || true; }
fi

"$PY" - <<'EOF'
import importlib.util
import pathlib
import re

spec = importlib.util.find_spec("torchvision")
if spec is None or spec.origin is None:
    raise SystemExit("setup.d/torchvision: torchvision is not installed")
path = pathlib.Path(spec.origin).parent / "_meta_registrations.py"
source = path.read_text()
marker = "# vista: guarded register_fake"
if marker not in source:
    # A decorator may be any expression (Python 3.9+): keep the function unregistered when the
    # compiled ops are absent, register it as before when they exist.
    pattern = re.compile(r'^@torch\.library\.register_fake\("torchvision::(nms|qnms)"\)$', re.M)
    patched, count = pattern.subn(
        lambda m: (f'@(torch.library.register_fake("torchvision::{m.group(1)}") '
                   f"if torchvision.extension._has_ops() else (lambda fn: fn))  {marker}"),
        source,
    )
    if count != 2:
        raise SystemExit(f"setup.d/torchvision: expected 2 register_fake decorators to guard, found {count}")
    if "import torchvision.extension" not in patched:
        patched = "import torchvision.extension\n" + patched
    path.write_text(patched)
    print(f"setup.d/torchvision: guarded nms/qnms fake registrations in {path}")
EOF
"$PY" -c "import torchvision.transforms.v2.functional" \
  || { echo "setup.d/torchvision: torchvision still fails to import" >&2; exit 1; }
