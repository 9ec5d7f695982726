"""``vista data convert NAME SRC DST``: read a raw release with a registered adapter and write
unified TaskRecords (JSONL) that ``records_path`` / the ``records`` loader read back, so one command
turns downloaded files into training and eval data.

Images are copied under ``DST/images/NAME/`` (keeping their path inside SRC) and the records point
at them relative to the JSONL file, so DST can be moved as a whole; ``--images reference`` keeps
absolute paths to the originals instead (``records_path``, the operator's own file, loads them as they
are; a release read here may not name absolute paths).  A record whose image is missing is skipped and reported,
not fatal: one bad item must not cost the other ten thousand.

Release files are data, never host paths: every image convert reads must resolve (symlinks
followed) inside SRC or a folder the user named with ``-o KEY=DIR`` (``coco_dir``, ``image_dir``,
...), and everything it writes stays inside DST (a record's ``dataset`` is made a safe folder name).
A record that names anything else is refused, counted and reported; the run goes on.
"""

from __future__ import annotations

import hashlib
import inspect
import re
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import click
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import vista_rl
from vista_plugin_datasets.common import PathRefused, judge_for
from vista_plugin_datasets.records import jsonl_line
from vista_rl import TaskRecord

ImageMode = Literal["copy", "reference"]


@dataclass
class ConvertResult:
    path: Path
    written: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (record id, why)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (record id, why): a path left its root
    task_types: Counter[str] = field(default_factory=Counter)
    judges: Counter[str] = field(default_factory=Counter)


def source_parameter(name: str) -> str:
    """The adapter's argument that takes SRC: its first parameter (``root``, or ``path`` for ``records``)."""
    loader = vista_rl.host().spec("datasets", name).load()
    parameters = list(inspect.signature(loader).parameters)
    if not parameters:
        raise click.ClickException(f"dataset {name!r} takes no arguments, so it has no SRC to read")
    return parameters[0]


def safe_name(name: str) -> str:
    """``name`` as one safe path component: "chartqa-test" stays, "../../../x" becomes "x"."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")
    return cleaned[:100] or "dataset"


def read_roots(src: Path, options: dict[str, Any]) -> list[Path]:
    """The folders convert may read images from: SRC (its folder when SRC is a file) and every
    folder the user named in an adapter option (``coco_dir``, ``image_dir``, ``image_root``, ...),
    as given (not resolved: :func:`_check_read` compares both forms)."""
    roots = [src if src.is_dir() else src.parent]
    for value in options.values():
        values = value if isinstance(value, list) else [value]
        roots += [Path(v) for v in values if isinstance(v, str) and v and Path(v).is_dir()]
    return roots


def _check_read(record_id: str, image: Path, roots: list[Path]) -> Path:
    """The image's real path, refused unless it lies (symlinks followed) inside a root, and unless
    the part a record supplied, after the root, is free of ``..`` steps: an adapter that joins a
    release's ``"../x.png"`` onto its image folder gets a path that may still sit in SRC, but it is
    not the file the layout names."""
    real = image.resolve()
    where = " or ".join(map(str, roots))
    if not any(real.is_relative_to(root.resolve()) for root in roots):
        raise PathRefused(record_id, str(image), where, "lies outside the release")
    for root in roots:
        if image.is_relative_to(root) and ".." in image.relative_to(root).parts:
            raise PathRefused(record_id, str(image), where, "steps out with '..'")
    return real


def _image_target(image: Path, src: Path, dataset: str) -> Path:
    folder = src if src.is_dir() else src.parent  # SRC may be a records file: its folder is the release
    try:
        inside = image.resolve().relative_to(folder.resolve())
    except ValueError:  # outside SRC (e.g. COCO for A-OKVQA): keep it apart, named by its folder
        inside = Path("external") / hashlib.sha256(str(image.parent.resolve()).encode()).hexdigest()[:10] / image.name
    return Path("images") / safe_name(dataset) / inside


def _place_images(record: TaskRecord, src: Path, dst: Path, mode: ImageMode, roots: list[Path]) -> TaskRecord:
    placed = []
    for image in map(Path, record.images):
        real = _check_read(record.id, image, roots)
        if not real.is_file():
            raise FileNotFoundError(f"image {image} is missing")
        if mode == "reference":
            placed.append(str(real))
            continue
        relative = _image_target(image, src, record.dataset)
        target = dst / relative
        if not target.parent.resolve().is_relative_to(dst.resolve()) or target.is_symlink():
            raise PathRefused(record.id, relative.as_posix(), dst, "would be written outside DST")
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real, target)
        placed.append(relative.as_posix())
    return record.model_copy(update={"images": placed})


def convert(name: str, src: str | Path, dst: str | Path, options: dict[str, Any] | None = None,
            images: ImageMode = "copy", limit: int | None = None, console: Console | None = None) -> ConvertResult:
    """Load ``name`` from ``src`` (plus adapter ``options``) and write ``dst/{dataset name}.jsonl``."""
    src, dst = Path(src), Path(dst)
    config = dict(options or {})
    config[source_parameter(name)] = str(src)
    if limit is not None:
        config["limit"] = limit
    dataset = vista_rl.make_dataset(name, **config)
    roots = read_roots(src, config)
    dst.mkdir(parents=True, exist_ok=True)
    result = ConvertResult(dst / f"{safe_name(str(getattr(dataset, 'name', name)))}.jsonl")
    result.refused += list(getattr(dataset, "refused", []))
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console or Console(stderr=True), transient=True) as progress, \
            result.path.open("w", encoding="utf-8") as handle:
        task = progress.add_task(f"converting {name}", total=len(dataset))
        for record in dataset:
            try:
                placed = _place_images(record, src, dst, images, roots)
            except PathRefused as exc:
                result.refused.append((record.id, str(exc)))
            except OSError as exc:
                result.skipped.append((record.id, str(exc)))
            else:
                handle.write(jsonl_line(placed))
                result.written += 1
                result.task_types[record.task_type] += 1
                result.judges[judge_for(record)] += 1
            progress.advance(task)
    if not result.written:
        result.path.unlink()
        first = (result.refused + result.skipped)[0][1] if result.refused or result.skipped else "none"
        raise click.ClickException(f"no record of {name} could be written; first problem: {first}")
    return result


def _parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} must look like KEY=VALUE", param_hint="--option")
        options[key] = yaml.safe_load(value)
    return options


@click.group("data")
def data_group() -> None:
    """Turn raw dataset releases into VISTA task records."""


@data_group.command("convert")
@click.argument("name")
@click.argument("src", type=click.Path(exists=True, path_type=Path))
@click.argument("dst", type=click.Path(file_okay=False, path_type=Path))
@click.option("--split", help="The split to read (the adapter's default otherwise).")
@click.option("-o", "--option", "options", multiple=True, metavar="KEY=VALUE",
              help="Another adapter argument, e.g. -o coco_dir=/data/coco -o subset=MapQA_U (YAML values).")
@click.option("--images", type=click.Choice(["copy", "reference"]), default="copy", show_default=True,
              help="Copy images under DST/images/ (portable) or keep absolute paths to the originals.")
@click.option("--limit", type=int, help="Convert only the first N records.")
def convert_command(name: str, src: Path, dst: Path, split: str | None, options: tuple[str, ...],
                    images: ImageMode, limit: int | None) -> None:
    """Read dataset NAME's raw files at SRC (see `vista datasets` for each layout) and write
    DST/<name>-<split>.jsonl, ready for `records_path` in eval and training configs."""
    config = _parse_options(options)
    if split:
        config["split"] = split
    console = Console()
    try:
        result = convert(name, src, dst, config, images, limit, console)
    except (FileNotFoundError, ValueError, KeyError, TypeError) as exc:
        raise click.ClickException(f"cannot convert {name} from {src}: {type(exc).__name__}: {exc}") from None
    table = Table(title=f"{name} -> {result.path}")
    for column in ("records", "skipped", "refused", "task types", "judges"):
        table.add_column(column)
    table.add_row(str(result.written), str(len(result.skipped)), str(len(result.refused)),
                  ", ".join(f"{k} {v}" for k, v in sorted(result.task_types.items())),
                  ", ".join(f"{k} {v}" for k, v in sorted(result.judges.items())))
    console.print(table)
    for record_id, why in result.skipped[:5]:
        console.print(f"skipped {record_id}: {why}", style="yellow", markup=False, highlight=False)
    for record_id, why in result.refused[:5]:
        console.print(f"refused {record_id}: {why}", style="red", markup=False, highlight=False)
    if result.refused:
        console.print(f"{len(result.refused)} record(s) refused: they name paths outside the release or DST",
                      style="red")
    # one line for both modes: records_path is the operator's own file, so --images reference's
    # absolute paths load as they are; soft_wrap keeps the line whole for copying
    console.print(f"eval: vista eval --env {env_for(result)} --model scripted:oracle "
                  f"--set env.config.records_path={result.path}", markup=False, highlight=False, soft_wrap=True)


def env_for(result: ConvertResult) -> str:
    """The env that scores every written record right: ``vqa/multiple-choice-v0`` when all have
    options, ``vqa/short-answer-v0`` when none has, ``vqa/records-v0`` for a mixed release."""
    kinds = {"multiple_choice" if judge == "multiple_choice" else "free" for judge in result.judges}
    if kinds == {"multiple_choice"}:
        return "vqa/multiple-choice-v0"
    return "vqa/short-answer-v0" if kinds == {"free"} else "vqa/records-v0"
