"""Read a wandb offline run back: its config, history rows and summary.

wandb (0.2x and later, whose ``wandb-core`` writes the run) ships no Python reader for the
``run-<id>.wandb`` file of an offline run, so checking what a run logged, without uploading it, needs
this: the file is a LevelDB-style log (32 KiB blocks of ``crc32, length, type`` framed chunks after a
``:W&B`` header) of wandb's own ``Record`` protobufs, decoded with wandb's generated classes.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HEADER = struct.Struct("<4sHB")  # ident, magic, version
_CHUNK = struct.Struct("<IHB")  # crc32 of type+data, data length, type
_BLOCK = 32768
_IDENT, _MAGIC = b":W&B", 0xBEE1
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


class OfflineRunError(ValueError):
    """The file is not a wandb run log, or it is damaged."""


@dataclass
class OfflineRun:
    """What an offline run holds: ``history`` is one dict per logged step (``_step`` included)."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None


def run_files(run_dir: Path) -> list[Path]:
    """The ``.wandb`` files of every offline run under ``RUN_DIR/wandb``, oldest first."""
    return sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))


def read_offline_run(path: Path) -> OfflineRun:
    """Decode one ``run-<id>.wandb`` file."""
    from wandb.proto.wandb_internal_pb2 import Record  # type: ignore[attr-defined]  # generated per protobuf version

    run = OfflineRun(path)
    for payload in _payloads(path.read_bytes()):
        record = Record()
        record.ParseFromString(payload)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            _apply(run.config, record.run.config.update)
        elif kind == "config":
            _apply(run.config, record.config.update)
        elif kind == "history":
            row: dict[str, Any] = {}
            _apply(row, record.history.item)
            run.history.append(row)
        elif kind == "summary":
            _apply(run.summary, record.summary.update)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    return run


def _apply(target: dict[str, Any], items: Any) -> None:
    for item in items:
        keys = list(item.nested_key) or [item.key]
        place = target
        for key in keys[:-1]:
            place = place.setdefault(key, {})
        place[keys[-1]] = json.loads(item.value_json)


def _payloads(data: bytes) -> Iterator[bytes]:
    if len(data) < _HEADER.size:
        raise OfflineRunError("too short for a wandb run log")
    ident, magic, _version = _HEADER.unpack_from(data)
    if (ident, magic) != (_IDENT, _MAGIC):
        raise OfflineRunError("not a wandb run log (bad header)")
    offset, pending = _HEADER.size, b""
    while offset + _CHUNK.size <= len(data):
        left = _BLOCK - offset % _BLOCK
        if left < _CHUNK.size:  # a block's tail too short for a chunk header is zero padding
            offset += left
            continue
        checksum, length, kind = _CHUNK.unpack_from(data, offset)
        body = data[offset + _CHUNK.size:offset + _CHUNK.size + length]
        offset += _CHUNK.size + length
        if kind == 0 and length == 0:  # zero padding up to the block's end (or a file being written)
            continue
        if len(body) < length or zlib.crc32(body, zlib.crc32(bytes((kind,)))) & 0xFFFFFFFF != checksum:
            raise OfflineRunError(f"damaged chunk before byte {offset}")
        if kind == _FULL:
            yield body
        elif kind == _FIRST:
            pending = body
        elif kind == _MIDDLE:
            pending += body
        elif kind == _LAST:
            yield pending + body
            pending = b""
        else:
            raise OfflineRunError(f"unknown chunk type {kind} before byte {offset}")
