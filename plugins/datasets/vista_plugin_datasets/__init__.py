"""Datasets of :class:`vista_rl.TaskRecord`: one generic loader and adapters from public release formats.

Import-light: HF ``datasets`` (pyarrow, pandas) loads only when a dataset is made.
"""

from __future__ import annotations

from typing import Any

import vista_rl


@vista_rl.hookimpl
def register_datasets(register: Any) -> None:
    register("records", "vista_plugin_datasets.records:load_records",
             description="TaskRecords from JSONL/JSON/parquet files (HF datasets), with column mapping")
    register("chartqa", "vista_plugin_datasets.adapters:load_chartqa",
             description="ChartQA release: {split}/{split}_{human,augmented}.json + {split}/png/")
    register("scienceqa", "vista_plugin_datasets.adapters:load_scienceqa",
             description="ScienceQA release: problems.json + pid_splits.json + images/{split}/{pid}/")
    register("geometry3k", "vista_plugin_datasets.adapters:load_geometry3k",
             description="Geometry3K (InterGPS) release: {split}/{id}/data.json + img_diagram.png")
    register("aokvqa", "vista_plugin_datasets.adapters:load_aokvqa",
             description="A-OKVQA release: aokvqa_v1p0_{split}.json + COCO 2017 images")
