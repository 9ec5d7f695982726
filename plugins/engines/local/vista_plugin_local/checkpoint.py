"""Checkpoints that a resumed run continues from bit for bit: weights, optimizer, scheduler, every
RNG the run draws from, and the engine's position in its data.

Run directories are shared and downloaded, so loading one must never run code. A checkpoint is
therefore no pickle: every tensor (weights, optimizer moments, RNG states) goes into one
safetensors file, and everything else (step counters, learning-rate schedule, optimizer settings,
Python's and NumPy's RNG state) into a JSON file that refers to those tensors by name. Loading
reads only those two formats; an old ``state.pt`` (pickle) checkpoint, or anything else, is refused
with a message naming the file.

Writes are atomic (a temporary directory renamed into place), so a crash or a full disk while saving
never damages the previous checkpoint.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from vista_rl import VistaError

CHECKPOINT_DIR = "checkpoints"
STATE_FILE = "state.json"
TENSORS_FILE = "tensors.safetensors"
LEGACY_STATE_FILE = "state.pt"  # pickle, written before 0.1.x moved to safetensors + JSON; never loaded
FORMAT = "vista-checkpoint"
FORMAT_VERSION = 1

# JSON markers for what plain JSON cannot say; a dict with one of these as its only key is decoded.
_TENSOR, _TUPLE, _ITEMS, _NDARRAY = "$tensor", "$tuple", "$items", "$ndarray"
_MARKERS = (_TENSOR, _TUPLE, _ITEMS, _NDARRAY)


class DiskFullError(VistaError):
    """Raised when the disk fills while writing run output."""


class CheckpointFormatError(VistaError):
    """A checkpoint this version cannot load safely: a pickle, a foreign file, or a damaged one."""


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


# ------------------------------------------------------------------ encoding
class _Encoder:
    """Turns a state tree into JSON-able data plus a flat ``name -> tensor`` map for safetensors.

    Tensors are named by their path in the tree (``policy/model/lm_head.weight``), so the weights can
    be read out of the file with any safetensors reader. Tensors that share memory (tied weights) are
    copied, because safetensors stores each name's bytes separately."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._storages: set[int] = set()

    def encode(self, value: Any, path: str) -> Any:
        if isinstance(value, torch.Tensor):
            return {_TENSOR: self._add_tensor(value, path)}
        if isinstance(value, np.ndarray):
            return {_NDARRAY: {"dtype": value.dtype.str, "shape": list(value.shape), "data": value.ravel().tolist()}}
        if isinstance(value, dict):
            if all(isinstance(k, str) and not k.startswith("$") for k in value):
                return {k: self.encode(v, f"{path}/{k}") for k, v in value.items()}
            return {_ITEMS: [[self.encode(k, f"{path}/key"), self.encode(v, f"{path}/{k}")] for k, v in value.items()]}
        if isinstance(value, tuple):
            return {_TUPLE: [self.encode(v, f"{path}/{i}") for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [self.encode(v, f"{path}/{i}") for i, v in enumerate(value)]
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, np.generic):
            return value.item()
        raise TypeError(f"checkpoint state at {path or '/'} is a {type(value).__name__}; a checkpoint holds only "
                        "tensors, arrays, numbers, strings, lists, tuples and dicts")

    def _add_tensor(self, tensor: torch.Tensor, path: str) -> str:
        name, n = path.lstrip("/") or "tensor", 1
        while name in self.tensors:
            n += 1
            name = f"{path.lstrip('/')}#{n}"
        tensor = tensor.detach().to("cpu")
        storage = tensor.untyped_storage().data_ptr()
        if storage and storage in self._storages:
            tensor = tensor.clone()
        elif storage:
            self._storages.add(storage)
        self.tensors[name] = tensor.contiguous()
        return name


def _decode(value: Any, tensors: dict[str, torch.Tensor], where: Path) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors, where) for v in value]
    if not isinstance(value, dict):
        return value
    marked = [k for k in value if k.startswith("$")]
    if not marked:
        return {k: _decode(v, tensors, where) for k, v in value.items()}
    if len(value) != 1 or marked[0] not in _MARKERS:
        raise CheckpointFormatError(f"{where} holds an entry this version cannot read ({sorted(value)[:3]}); "
                                    "it was not written by this version of VISTA")
    (marker, body), = value.items()
    if marker == _TENSOR:
        if not isinstance(body, str) or body not in tensors:
            raise CheckpointFormatError(f"{where} names a tensor {body!r} that {where.parent / TENSORS_FILE} lacks; "
                                        "the checkpoint is damaged")
        return tensors[body]
    if marker == _TUPLE:
        return tuple(_decode(v, tensors, where) for v in body)
    if marker == _ITEMS:
        return {_decode(k, tensors, where): _decode(v, tensors, where) for k, v in body}
    dtype = np.dtype(body["dtype"])
    if dtype.kind not in "biuf":  # numbers only: an object array would be a door back to pickle
        raise CheckpointFormatError(f"{where} holds an array of dtype {dtype}; only numeric arrays are read")
    return np.asarray(body["data"], dtype=dtype).reshape(body["shape"])


# ------------------------------------------------------------------ files
def _write_state(directory: Path, state: dict[str, Any]) -> None:
    encoder = _Encoder()
    tree = encoder.encode(state, "")
    try:
        save_file(encoder.tensors, str(directory / TENSORS_FILE), metadata={"format": FORMAT})
    except OSError:
        raise
    except Exception as exc:  # safetensors reports I/O failures as its own error type
        if "os error 28" in str(exc).lower() or "no space left" in str(exc).lower():
            raise OSError(errno.ENOSPC, str(exc)) from exc
        raise
    _check_complete(directory / TENSORS_FILE)
    document = {"format": FORMAT, "version": FORMAT_VERSION, "tensors": TENSORS_FILE, "state": tree}
    with open(directory / STATE_FILE, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
        handle.flush()
        os.fsync(handle.fileno())


def _check_complete(path: Path) -> None:
    """Flush ``path`` to disk and check it holds every byte its header promises: safetensors' writer
    can drop a failed final flush (a full disk) without an error, leaving a truncated file."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
        head = handle.read(8)
        size = int.from_bytes(head, "little") if len(head) == 8 else -1
        try:
            header = json.loads(handle.read(size)) if 0 < size < 2**27 else None
        except ValueError:
            header = None
    ends = [entry["data_offsets"][1] for key, entry in (header or {}).items() if key != "__metadata__"]
    if header is None or path.stat().st_size != 8 + size + max(ends, default=0):
        raise OSError(errno.ENOSPC, f"{path} was not written completely (is the disk full?)")


def _refuse_legacy(path: Path) -> CheckpointFormatError:
    return CheckpointFormatError(
        f"{path / LEGACY_STATE_FILE} is a pickle checkpoint (written by VISTA before checkpoints moved to "
        "safetensors + JSON, or by another program). Unpickling a file can run any code, so VISTA does not "
        f"load it. Start a new run instead: `vista train CONFIG.yaml` with a fresh output_dir, and set "
        f"model.path to a model directory the run saved (e.g. {path.parent.parent / 'models'}/<name>, "
        "safetensors) to keep its weights")


def _read_state(path: Path) -> dict[str, Any]:
    state_file = path / STATE_FILE
    if not state_file.is_file():
        if (path / LEGACY_STATE_FILE).exists():
            raise _refuse_legacy(path)
        raise CheckpointFormatError(f"{path} has no {STATE_FILE}; it is not a VISTA checkpoint")
    try:
        document = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CheckpointFormatError(f"{state_file} cannot be read as JSON ({exc}); the checkpoint is damaged") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise CheckpointFormatError(f"{state_file} is not a VISTA checkpoint (no \"format\": \"{FORMAT}\")")
    if document.get("version") != FORMAT_VERSION:
        raise CheckpointFormatError(f"{state_file} has checkpoint format version {document.get('version')!r}; "
                                    f"this VISTA reads version {FORMAT_VERSION}. Upgrade vista-plugin-local")
    try:
        tensors = load_file(str(path / TENSORS_FILE), device="cpu")
    except Exception as exc:  # missing or damaged file: say which
        raise CheckpointFormatError(f"{path / TENSORS_FILE} cannot be read ({exc}); the checkpoint is damaged") from None
    try:
        state = _decode(document.get("state"), tensors, state_file)
    except CheckpointFormatError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise CheckpointFormatError(f"{state_file} is malformed ({exc}); the checkpoint is damaged") from None
    if not isinstance(state, dict):
        raise CheckpointFormatError(f"{state_file} holds no state object; the checkpoint is damaged")
    return state


def save_checkpoint(run_dir: Path, name: str, state: dict[str, Any], keep: int) -> Path:
    """Write ``run_dir/checkpoints/<name>/`` (``state.json`` + ``tensors.safetensors``) atomically
    and prune old checkpoints."""
    root = run_dir / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    final = root / name
    tmp = root / f".{name}.tmp"
    previous = latest_checkpoint(run_dir)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        _write_state(tmp, state)
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
    """Every checkpoint directory, old pickle ones included, so that resuming a run whose latest
    checkpoint is a pickle refuses it instead of silently resuming from an older one."""
    found = [p for p in root.glob("step-*") if (p / STATE_FILE).exists() or (p / LEGACY_STATE_FILE).exists()]
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
    """The latest checkpoint's state, read without unpickling anything."""
    path = latest_checkpoint(run_dir)
    if path is None:
        raise VistaError(f"{run_dir} has no checkpoint to resume from (looked in {run_dir / CHECKPOINT_DIR}); "
                         "start a new run with `vista train CONFIG.yaml`")
    return _read_state(path)
