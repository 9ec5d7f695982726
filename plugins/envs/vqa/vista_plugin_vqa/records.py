"""Where record envs get their records: a registered dataset (``dataset`` + ``dataset_config``),
a JSONL/parquet file of TaskRecords (``records_path``) or records inline (``records``).  Loaded
datasets are cached per process, since check_env and rollouts create many env instances.

What a remote client may set (``vista env-server``) is marked here, once, for every record env:
``records_path`` and ``dataset_config`` are server-only (they name host files and factory
arguments); ``records`` are client data whose image references the server resolves inside its
``--records-root`` (or inline ``data:image/...;base64,`` images), see :mod:`vista_rl.config_fields`.
Because only the operator names ``records_path``, its records may name absolute image paths."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Annotated, Any

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

import vista_rl
from vista_rl import TaskRecord, config_fields


class RecordSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str | None = Field(None, description="registered dataset id, e.g. scienceqa")
    dataset_config: Annotated[dict[str, Any], config_fields.ServerArguments] = Field(default_factory=dict)
    records_path: Annotated[str | None, config_fields.HostPath] = Field(
        None, description="JSONL/JSON/parquet file of TaskRecords")
    records: Annotated[list[dict[str, Any]] | None, config_fields.ClientRecords] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> RecordSource:
        given = [name for name in ("dataset", "records_path", "records") if getattr(self, name)]
        if len(given) != 1:
            raise ValueError("give exactly one of dataset (+ dataset_config), records_path or records; "
                             f"got {given or 'none'}")
        return self


@lru_cache(maxsize=16)
def _load(key: str) -> tuple[TaskRecord, ...]:
    spec = json.loads(key)
    if spec.get("records"):
        return tuple(TaskRecord(**row) for row in spec["records"])
    if spec.get("records_path"):
        # records_path is the operator's own file (HostPath: no client sets it), so the absolute image
        # paths of `vista data convert --images reference` are kept; a client's records never get here
        return tuple(vista_rl.make_dataset("records", path=spec["records_path"], absolute_images=True))
    return tuple(vista_rl.make_dataset(spec["dataset"], **spec["dataset_config"]))


def load_records(source: RecordSource) -> tuple[TaskRecord, ...]:
    records = _load(json.dumps(source.model_dump(), sort_keys=True, default=str))
    if not records:
        raise ValueError("the record source holds no records")
    return records


def load_images(record: TaskRecord, max_pixels: int = config_fields.MAX_RECORD_IMAGE_PIXELS) -> list[Image.Image]:
    """The record's images as RGB: file paths or inline ``data:image/...;base64,`` images, each
    checked against ``max_pixels`` from its header before it is decoded."""
    return [config_fields.load_image_reference(ref, max_pixels) for ref in record.images]
