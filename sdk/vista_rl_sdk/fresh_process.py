"""Run one function in a fresh Python interpreter with another hash seed, for determinism checks.

Why a fresh interpreter: an env seeded from ``hash()`` of a string, the clock or global random state
gives the same episode twice in one process and a different one in the next, which is exactly what
breaks resumed training and parallel workers.  Comparing a result computed here with the same call
made in a new process (with another ``PYTHONHASHSEED``) catches that.  Every cross-process check of
the SDK (``check_env``'s reset fingerprints, ``game_testing``'s episode fingerprints) goes through
:func:`call_in_fresh_process`.
"""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from typing import Any

#: Marks the result line on the child's stdout, so anything the function prints is ignored.
_RESULT = "vista-fresh-process-result:"


def call_in_fresh_process(target: str, *args: Any, hash_seed: str = "12345", timeout: float = 300) -> Any:
    """``target(*args)`` in a new interpreter; ``target`` is ``"module:function"``, the arguments and
    the result must be JSON-ready (the result comes back as JSON gives it: tuples as lists).

    The child gets ``PYTHONHASHSEED=hash_seed`` and this process's ``sys.path``, so it imports the
    same code.  Raises ``RuntimeError`` with the end of the child's stderr when it fails.
    """
    payload = json.dumps({"target": target, "args": list(args)})
    env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    code = "import sys; from vista_rl_sdk.fresh_process import _child; _child(sys.argv[1])"
    completed = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, text=True,
                               env=env, timeout=timeout)
    lines = [line for line in completed.stdout.splitlines() if line.startswith(_RESULT)]
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"{target} failed in a fresh process (exit code {completed.returncode}):\n"
                           f"{completed.stderr[-2000:]}")
    return json.loads(lines[-1][len(_RESULT):])


def _child(payload: str) -> None:
    data = json.loads(payload)
    result = pkgutil.resolve_name(data["target"])(*data["args"])
    print(_RESULT + json.dumps(result), flush=True)
