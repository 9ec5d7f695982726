"""Issue 23, group D: path confinement in the last adapter modules (adapters.py, charts.py), and
real records for the datasets the earlier groups found none for.

Path confinement: a release file is data from whoever published it.  A row naming an image outside
its release (absolute, ``..``, a symlink leading out) is refused by its record id and counted on
``dataset.refused``; the release's other rows still load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image
from vista_plugin_datasets import testing

import vista_rl


def load(dataset: str, **config: Any) -> vista_rl.TaskDataset:
    return vista_rl.make_dataset(dataset, **config)


def refused_ids(dataset: Any) -> list[str]:
    return [record_id for record_id, _ in dataset.refused]


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.png"
    Image.new("RGB", (4, 4), "red").save(secret)
    return secret


# ---------------------------------------------------------------- path confinement: adapters.py


def test_chartqa_rows_naming_paths_outside_png_are_refused_by_id(tmp_path):
    root = testing.write_chartqa(tmp_path / "raw")
    (root / "test" / "png" / "link.png").symlink_to(_secret(tmp_path))
    path = root / "test" / "test_human.json"
    rows = json.loads(path.read_text())
    rows += [{"imgname": "/etc/passwd", "query": "q", "label": "1"},
             {"imgname": "../../secret.png", "query": "q", "label": "2"},
             {"imgname": "link.png", "query": "q", "label": "3"}]
    path.write_text(json.dumps(rows))
    data = load("chartqa", root=str(root), split="test")
    assert refused_ids(data) == ["chartqa-test-human-2", "chartqa-test-human-3", "chartqa-test-human-4"]
    assert "is absolute" in data.refused[0][1] and "'..'" in data.refused[1][1] and "symlink" in data.refused[2][1]
    assert [r.id for r in data] == ["chartqa-test-human-0", "chartqa-test-human-1", "chartqa-test-augmented-0"]


def test_scienceqa_image_or_pid_outside_the_release_is_refused_by_id(tmp_path):
    root = testing.write_scienceqa(tmp_path / "sqa")
    problems = json.loads((root / "problems.json").read_text())
    problems["66"] = problems["5"] | {"image": "../../../../etc/passwd"}
    problems["../../.."] = problems["5"]
    (root / "problems.json").write_text(json.dumps(problems))
    splits = json.loads((root / "pid_splits.json").read_text())
    splits["test"] += ["66", "../../.."]
    (root / "pid_splits.json").write_text(json.dumps(splits))
    data = load("scienceqa", root=str(root), split="test")
    assert refused_ids(data) == ["scienceqa-66", "scienceqa-../../.."]
    assert [r.id for r in data] == ["scienceqa-5", "scienceqa-9"]


def test_geometry3k_problem_folder_linking_out_is_refused_by_id(tmp_path):
    root = testing.write_geometry3k(tmp_path / "g3k")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "data.json").write_text((root / "test" / "2401" / "data.json").read_text())
    (root / "test" / "2403").symlink_to(outside, target_is_directory=True)
    data = load("geometry3k", root=str(root), split="test")
    assert refused_ids(data) == ["geometry3k-2403"] and "symlink" in data.refused[0][1]
    assert [r.id for r in data] == ["geometry3k-2401", "geometry3k-2402"]


def test_aokvqa_coco_image_linking_out_is_refused_by_id(tmp_path):
    root, coco = testing.write_aokvqa(tmp_path / "aok")
    image = coco / "val2017" / f"{8:012d}.jpg"
    image.unlink()
    image.symlink_to(_secret(tmp_path))
    for mode in ("multiple_choice", "direct"):
        data = load("aokvqa", root=str(root), coco_dir=str(coco), split="val", mode=mode)
        assert refused_ids(data) == ["aokvqa-abc"] and [r.id for r in data] == ["aokvqa-22jbM6gDxdaMaunuzgrsBB"]


# ---------------------------------------------------------------- path confinement: charts.py


def test_figureqa_and_plotqa_image_index_outside_png_is_refused_by_id(tmp_path):
    root = testing.write_figureqa(tmp_path / "fqa")
    path = root / "validation1" / "qa_pairs.json"
    data = json.loads(path.read_text())
    data["qa_pairs"].append(data["qa_pairs"][0] | {"image_index": "../../../secret"})
    path.write_text(json.dumps(data))
    figureqa = load("figureqa", root=str(root), split="validation1")
    assert refused_ids(figureqa) == ["figureqa-validation1-2"] and len(figureqa) == 2

    root = testing.write_plotqa(tmp_path / "pqa")
    path = root / "test" / "qa_pairs_V2.json"
    data = json.loads(path.read_text())
    data["qa_pairs"].insert(0, data["qa_pairs"][0] | {"image_index": "/etc/passwd"})
    path.write_text(json.dumps(data))
    plotqa = load("plotqa", root=str(root), split="test")
    assert refused_ids(plotqa) == ["plotqa-test-0"] and "is absolute" in plotqa.refused[0][1]
    assert [r.id for r in plotqa] == ["plotqa-test-1", "plotqa-test-2", "plotqa-test-3"]
