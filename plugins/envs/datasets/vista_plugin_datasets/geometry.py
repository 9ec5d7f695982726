"""GeoQA and UniGeo: the authors publish pickles (allennlp readers), one list of problems per split,
each a dict with the diagram as a numpy array (``image``), the problem text, four ``choices`` and
the right one's index (``label``), plus the solution program (``manual_program``, ``numbers``).

- GeoQA (chen-judge/GeoQA, GeoQA2.2): ``{split}.pk`` for train/dev/test; the problem is Chinese
  (``subject``), with an English version in ``English_problem`` where the release has one.
- UniGeo (chen-judge/UniGeo): ``calculation_{split}.pk`` for train/val/test (the same fields, the
  problem in English).  The proving half (``proving_*.pk``) has no single answer to judge and is not read.

Pickles can run code when loaded, so these are read with an unpickler that builds only numpy arrays
and plain data (what the releases hold: lists of dicts of str/int/float/list plus ``numpy.ndarray``
diagrams and numpy scalars, written by numpy 1.x as ``numpy.core.multiarray`` or by numpy 2 as
``numpy._core.multiarray``), and refuses any other class before it is built.  Diagrams are written
once as PNG files into ``image_cache_dir`` (default ``{root}/.vista-images``), since records point at
image files; a problem ``id`` is file data, so its PNG path is confined to that folder.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vista_plugin_datasets.common import build_each, choice_fields, resolve_inside, take
from vista_plugin_datasets.records import TaskDataset
from vista_rl import TaskRecord

_ALLOWED = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),  # pickle protocol 5
    ("collections", "OrderedDict"),
}
_TEXT_KEYS = ("English_problem", "problem", "subject")


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load {module}.{name} from a problem pickle: only numpy arrays and plain data are "
                "allowed (a pickle can run code when loaded; is this file really a GeoQA/UniGeo release?)")
        return super().find_class(module, name)


def read_problem_pickle(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; is the dataset root right?")
    with path.open("rb") as handle:
        data = _ArrayUnpickler(handle).load()
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a list of problems, got {type(data).__name__}")
    return data


def _diagram(array: Any, target: Path) -> str:
    if not target.exists():
        from PIL import Image

        target.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(array).save(target)
    return str(target)


def _load(path: Path, dataset: str, split: str, image_cache_dir: str | None, limit: int | None) -> TaskDataset:
    cache = Path(image_cache_dir) if image_cache_dir else path.parent / ".vista-images"
    refused: list[tuple[str, str]] = []

    def build(item: tuple[int, dict[str, Any]]) -> TaskRecord | None:
        index, problem = item
        text = next((problem[key] for key in _TEXT_KEYS if problem.get(key)), None)
        if text is None or problem.get("label") is None:
            return None
        pid = str(problem.get("id", index))
        record_id = f"{dataset}-{split}-{pid}"
        target = resolve_inside(cache, f"{dataset}/{split}/{pid}.png", record_id)
        return TaskRecord(
            id=record_id, dataset=dataset, question=str(text), images=[_diagram(problem["image"], target)],
            metadata={"split": split, "solution": problem.get("answer"),
                      "program": [str(step) for step in problem.get("manual_program") or []],
                      "numbers": [str(n) for n in problem.get("numbers") or []]},
            **choice_fields(problem["choices"], int(problem["label"])))

    records: Iterator[TaskRecord] = build_each(enumerate(read_problem_pickle(path)), build, refused)
    return take(records, f"{dataset}-{split}", limit, refused)


def load_geoqa(root: str, split: str = "test", image_cache_dir: str | None = None,
               limit: int | None = None) -> TaskDataset:
    return _load(Path(root) / f"{split}.pk", "geoqa", split, image_cache_dir, limit)


def load_unigeo(root: str, split: str = "test", image_cache_dir: str | None = None,
                limit: int | None = None) -> TaskDataset:
    return _load(Path(root) / f"calculation_{split}.pk", "unigeo", split, image_cache_dir, limit)
