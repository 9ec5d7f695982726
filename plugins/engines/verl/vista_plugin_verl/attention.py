"""The attention verl's FSDP workers use, chosen by whether flash-attn is installed.

verl builds every HF model with ``attn_implementation=flash_attention_2`` unless told otherwise
(``verl/workers/config/model.py:185``), and ``verl[vllm]`` does not install flash-attn, so a cluster's
first launch dies in ``from_pretrained``.  Without flash-attn the engine therefore asks for PyTorch's
``sdpa`` and padded batches (``use_remove_padding=false``): remove-padding packs a micro-batch into one
row told apart only by position ids, which flash-attn's varlen kernels honour and ``sdpa`` does not.
A user's own ``engine_config.verl.overrides`` of these keys win.
"""

from __future__ import annotations

import importlib.util
import subprocess
from collections.abc import Sequence

MODULE = "flash_attn"
#: The keys set when flash-attn is missing, per model (``actor_rollout_ref.model``, ``critic.model``).
KEYS = ("use_remove_padding", "override_config.attn_implementation")
PROBE_TIMEOUT_S = 60.0


def flash_attn_installed(python: str | None) -> bool:
    """Whether the interpreter that runs verl (``python``; ``None``: this one) can import flash-attn."""
    if python is None:
        return importlib.util.find_spec(MODULE) is not None
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({MODULE!r}) else 1)"
    try:
        return subprocess.run([python, "-c", code], check=False, capture_output=True,
                              timeout=PROBE_TIMEOUT_S).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False  # the launch would fail on its own; sdpa is the safe choice


def sdpa_overrides(critic: bool, user_overrides: Sequence[str]) -> list[str]:
    """sdpa and padded batches for each model, except keys the user's overrides set themselves."""
    models = ["actor_rollout_ref.model", *(["critic.model"] if critic else [])]
    taken = {item.split("=", 1)[0].lstrip("+~") for item in user_overrides}
    out = []
    for model in models:
        if f"{model}.use_remove_padding" not in taken:
            out.append(f"{model}.use_remove_padding=false")
        if f"{model}.override_config.attn_implementation" not in taken:
            out.append(f"+{model}.override_config.attn_implementation=sdpa")
    return out


def note(installed: bool) -> str | None:
    """What the dry run says about the choice."""
    if installed:
        return None
    return ("flash-attn is not installed where verl runs: its FSDP workers use sdpa and padded batches "
            "(actor_rollout_ref.model.use_remove_padding=false, override_config.attn_implementation=sdpa); "
            "pip install flash-attn there for verl's defaults")
