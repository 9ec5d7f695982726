"""Datasets of :class:`vista_rl.TaskRecord`: one generic loader and adapters from public release formats.

Import-light: HF ``datasets`` (pyarrow, pandas) loads only when a dataset is made.  ``ADAPTERS``
is the one table of what is registered: id, loader, the release layout the loader expects (shown
by ``vista datasets``) and the judge its records are scored with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import vista_rl

if TYPE_CHECKING:
    import click


class Adapter(NamedTuple):
    id: str
    target: str
    layout: str
    judges: str


_M = "vista_plugin_datasets."
ADAPTERS: tuple[Adapter, ...] = (
    Adapter("records", _M + "records:load_records",
            "TaskRecords from JSONL/JSON/parquet files (HF datasets), with column mapping", "by task type"),
    Adapter("chartqa", _M + "adapters:load_chartqa",
            "ChartQA: {split}/{split}_{human,augmented}.json + {split}/png/", "relaxed_numeric / exact"),
    Adapter("scienceqa", _M + "adapters:load_scienceqa",
            "ScienceQA: problems.json + pid_splits.json + images/{split}/{pid}/", "multiple_choice"),
    Adapter("geometry3k", _M + "adapters:load_geometry3k",
            "Geometry3K (InterGPS): {split}/{id}/data.json + img_diagram.png", "multiple_choice"),
    Adapter("aokvqa", _M + "adapters:load_aokvqa",
            "A-OKVQA: aokvqa_v1p0_{split}.json + coco_dir/{split}2017/{image_id:012d}.jpg",
            "multiple_choice; direct mode: vqa_accuracy"),
    Adapter("figureqa", _M + "charts:load_figureqa",
            "FigureQA: {split}/qa_pairs.json ({qa_pairs: [...]}, answer 1/0) + {split}/png/{image_index}.png",
            "multiple_choice (Yes/No)"),
    Adapter("plotqa", _M + "charts:load_plotqa",
            "PlotQA: {split}/qa_pairs_V2.json ({qa_pairs: [...]}) + {split}/png/{image_index}.png",
            "relaxed_numeric / exact"),
    Adapter("geoqa", _M + "geometry:load_geoqa",
            "GeoQA (GeoQA2.2): {split}.pk pickles (image array, subject, choices, label); diagrams cached as PNG",
            "multiple_choice"),
    Adapter("unigeo", _M + "geometry:load_unigeo",
            "UniGeo: calculation_{split}.pk pickles (image array, English_problem, choices, label)",
            "multiple_choice"),
    Adapter("mapqa", _M + "open_answers:load_mapqa",
            "MapQA: {subset}/questions/{split}-QA.json + {subset}/images/{map_id}",
            "set_match (region lists) / exact / relaxed_numeric"),
    Adapter("vizwiz", _M + "open_answers:load_vizwiz",
            "VizWiz VQA: Annotations/{split}.json (10 answers each) + {split}/VizWiz_{split}_*.jpg", "vqa_accuracy"),
    Adapter("docvqa", _M + "open_answers:load_docvqa",
            "DocVQA (SP): {split}_v1.0_withQT.json ({data: [...]}) + documents/*.png", "anls"),
    Adapter("clevr", _M + "clevr:load_clevr",
            "CLEVR v1.0: questions/CLEVR_{split}_questions.json + images/{split}/", "exact / relaxed_numeric"),
    Adapter("clevr_math", _M + "clevr:load_clevr_math",
            "CLEVR-Math: clevr-math-{split}.json + clevr_dir (CLEVR_v1.0)/images/{split}/", "math"),
    Adapter("tabmwp", _M + "science:load_tabmwp",
            "TabMWP: problems_{split}.json + tables/{pid}.png", "math / multiple_choice / exact"),
    Adapter("ai2d", _M + "science:load_ai2d",
            "AI2D: questions/{image}.json + images/ (+ abc_images/); test_ids file picks the test split",
            "multiple_choice"),
    Adapter("iconqa", _M + "science:load_iconqa",
            "IconQA: problems.json (split, ques_type per pid) + iconqa/{split}/{ques_type}/{pid}/image.png",
            "multiple_choice / math"),
    Adapter("mathvista", _M + "science:load_mathvista",
            "MathVista: {split}.json (testmini/test) + images/{pid}.jpg, or HF data/{split}-*.parquet", "multiple_choice / math / exact"),
)


@vista_rl.hookimpl
def register_datasets(register: vista_rl.RegisterDataset) -> None:
    for adapter in ADAPTERS:
        register(adapter.id, adapter.target, description=f"{adapter.layout} -> judge: {adapter.judges}")


@vista_rl.hookimpl
def register_commands(cli: click.Group) -> None:
    import click

    from vista_plugin_datasets.convert import data_group

    existing = cli.commands.get("data")
    if isinstance(existing, click.Group):
        for name, command in data_group.commands.items():
            existing.add_command(command, name)
    else:
        cli.add_command(data_group)
