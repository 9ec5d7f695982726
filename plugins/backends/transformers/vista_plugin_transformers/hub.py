"""Where a model spec points: a local directory, or a Hugging Face Hub id, decided before loading.

Handing an unknown string straight to ``from_pretrained`` makes a typo expensive: offline,
``transformers:runs/tiny-typo`` spent 148 s in hub retries before failing.  So the spec is resolved
first, as pip resolves a requirement before it builds anything:

- it exists on disk: a local model;
- it looks like a path (:func:`vista_rl.model_paths.looks_like_path`) but does not exist: fail at once;
- otherwise a hub id: offline (``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE``) it must be in the local
  cache, and loads from there; online, one metadata request with a short timeout
  (``VISTA_HUB_TIMEOUT_S``, default 10 s) says whether the repo exists and the hub is reachable,
  before any download starts.
"""

from __future__ import annotations

import os
from pathlib import Path

from vista_rl.model_paths import ModelPathError, looks_like_path

HUB_TIMEOUT_ENV_VAR = "VISTA_HUB_TIMEOUT_S"
_TRUE = {"1", "on", "yes", "true"}


def hub_offline() -> bool:
    """True when the user asked for no hub traffic (read now, not at import time)."""
    if any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:  # pragma: no cover - huggingface_hub ships with transformers
        return False


def hub_timeout_s() -> float:
    try:
        return max(0.1, float(os.environ.get(HUB_TIMEOUT_ENV_VAR, "10")))
    except ValueError:
        return 10.0


def resolve_pretrained(spec: str) -> str:
    """What to give ``from_pretrained`` for ``spec``: a local directory, or a hub id known to be
    loadable.  Raises :class:`ModelPathError` with what to do, without waiting on the network."""
    local = Path(spec).expanduser()
    if local.exists():
        return str(local)
    if looks_like_path(spec):
        raise ModelPathError(f"model path {spec} does not exist (a path-like spec is never looked up on the "
                             "Hugging Face Hub; check the directory name)")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        cached: str | None = snapshot_download(spec, local_files_only=True)
    except (LocalEntryNotFoundError, OSError, ValueError):
        cached = None
    if hub_offline():
        if cached is None:
            raise ModelPathError(f"{spec!r} is not a local directory and not in the local Hugging Face cache, and "
                                 "hub access is off (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE); give a model directory")
        return cached
    return _check_on_hub(spec, cached)


def _check_on_hub(spec: str, cached: str | None) -> str:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    timeout = hub_timeout_s()
    try:
        HfApi().model_info(spec, timeout=timeout)  # a fresh client: honours the endpoint set now
    except (RepositoryNotFoundError, GatedRepoError) as exc:
        raise ModelPathError(f"{spec!r} is not a local directory, and the Hugging Face Hub has no model you can "
                             f"load under that id ({type(exc).__name__}); check the name") from None
    except HfHubHTTPError:
        return spec  # the hub answered (rate limit, server error): let from_pretrained deal with it
    except Exception as exc:  # noqa: BLE001 - connection refused, DNS failure, timeout: all mean "unreachable"
        if cached is not None:
            return cached
        raise ModelPathError(f"{spec!r} is not a local directory, and the Hugging Face Hub could not be reached "
                             f"within {timeout:g} s ({type(exc).__name__}: {exc}); give a model directory, or set "
                             "HF_HUB_OFFLINE=1 to use only the local cache") from None
    return spec
