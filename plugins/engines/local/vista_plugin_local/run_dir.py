"""The run directory: refuse to overwrite a run that has checkpoints, and record what made the run
(``config.yaml``, ``versions.json``) and what it found (``results.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import yaml

from vista_plugin_local.checkpoint import latest_checkpoint
from vista_rl import VistaError, host
from vista_rl.config import RunConfig
from vista_rl.store import versions as store_versions

RESULTS_FILE = "results.json"


def check_run_dir(run_dir: Path, resuming: bool) -> None:
    """A resumed run needs its directory; a new one must not land on a run with checkpoints."""
    if resuming:
        if not run_dir.is_dir():
            raise VistaError(f"--resume {run_dir}: no such run directory")
        return
    if latest_checkpoint(run_dir) is not None:
        raise VistaError(f"{run_dir} already holds a run with checkpoints; continue it with "
                         f"`vista train --resume {run_dir}` or choose another output_dir "
                         "(--set output_dir=...)")


def prepare_run_dir(run_dir: Path, run: RunConfig, resuming: bool) -> None:
    """Check the directory, and for a new run write its config and the versions that ran it."""
    check_run_dir(run_dir, resuming)
    if resuming:
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(run.model_dump(), sort_keys=False))
    versions: dict[str, Any] = {
        "vista-rl": store_versions()["vista-rl"], "torch": torch.__version__,
        "plugins": {p.name: f"{p.distribution} {p.version}" for p in host().plugins() if not p.builtin}}
    try:
        import transformers

        versions["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover - the engine needs it to load a model anyway
        pass
    (run_dir / "versions.json").write_text(json.dumps(versions, indent=2))


def write_results(run_dir: Path, summary: dict[str, Any]) -> None:
    (run_dir / RESULTS_FILE).write_text(json.dumps(summary, indent=2))
