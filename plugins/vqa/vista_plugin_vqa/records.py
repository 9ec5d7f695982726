"""Where record envs get their records: a registered dataset (``dataset`` + ``dataset_config``),
a JSONL/parquet file of TaskRecords (``records_path``) or records inline (``records``).  Loaded
datasets are cached per process, since check_env and rollouts create many env instances."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

import vista_rl
from vista_rl import TaskRecord


class RecordSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str | None = Field(None, description="registered dataset id, e.g. scienceqa")
    dataset_config: dict[str, Any] = Field(default_factory=dict)
    records_path: str | None = Field(None, description="JSONL/JSON/parquet file of TaskRecords")
    records: list[dict[str, Any]] | None = None

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
        return tuple(vista_rl.make_dataset("records", path=spec["records_path"]))
    return tuple(vista_rl.make_dataset(spec["dataset"], **spec["dataset_config"]))


def load_records(source: RecordSource) -> tuple[TaskRecord, ...]:
    records = _load(json.dumps(source.model_dump(), sort_keys=True, default=str))
    if not records:
        raise ValueError("the record source holds no records")
    return records


def load_images(record: TaskRecord) -> list[Image.Image]:
    images = []
    for path in record.images:
        with Image.open(path) as image:
            images.append(image.convert("RGB"))
    return images
