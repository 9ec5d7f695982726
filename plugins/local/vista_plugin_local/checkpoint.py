"""Checkpoints that a resumed run continues from bit for bit: weights, optimizer, scheduler, every
RNG the run draws from, and the engine's position in its data.

Writes are atomic (a temporary directory renamed into place), so a crash or a full disk while saving
never damages the previous checkpoint.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vista_rl import VistaError

CHECKPOINT_DIR = "checkpoints"
STATE_FILE = "state.pt"


class DiskFullError(VistaError):
    """Raised when the disk fills while writing run output."""


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "numpy": np.random.get_state(),
                             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def disk_full_message(path: Path, previous: Path | None) -> str:
    kept = f"the previous checkpoint {previous} is intact" if previous else "nothing written earlier was touched"
    return (f"out of disk space while writing {path}; {kept}. Free some space, then continue with "
            f"`vista train --resume {path.parent.parent if path.parent.name == CHECKPOINT_DIR else path.parent}`")


def save_checkpoint(run_dir: Path, name: str, state: dict[str, Any], keep: int) -> Path:
    """Write ``run_dir/checkpoints/<name>/state.pt`` atomically and prune old checkpoints."""
    root = run_dir / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    tmp = root / f".{name}.tmp"
    previous = latest_checkpoint(run_dir)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        torch.save(state, tmp / STATE_FILE)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if exc.errno == errno.ENOSPC:
            raise DiskFullError(disk_full_message(final, previous)) from None
        raise
    _prune(root, keep)
    return final


def _checkpoints(root: Path) -> list[Path]:
    found = [p for p in root.glob("step-*") if (p / STATE_FILE).exists()]
    return sorted(found, key=lambda p: p.stat().st_mtime_ns)


def _prune(root: Path, keep: int) -> None:
    for old in _checkpoints(root)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)


def latest_checkpoint(run_dir: Path) -> Path | None:
    root = run_dir / CHECKPOINT_DIR
    if not root.is_dir():
        return None
    found = _checkpoints(root)
    return found[-1] if found else None


def load_checkpoint(run_dir: Path) -> dict[str, Any]:
    path = latest_checkpoint(run_dir)
    if path is None:
        raise VistaError(f"{run_dir} has no checkpoint to resume from (looked in {run_dir / CHECKPOINT_DIR}); "
                         "start a new run with `vista train CONFIG.yaml`")
    state: dict[str, Any] = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    return state
