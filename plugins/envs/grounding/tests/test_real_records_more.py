"""Issue 23, group D for the grounding adapters: path confinement (every image a release names stays
inside the release; a row naming anything else is refused by its record id and counted on
``dataset.refused``, the others load), and real records found for more grounding releases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image
from vista_plugin_grounding import testing

import vista_rl


def refused_ids(dataset: Any) -> list[str]:
    """The ids of the rows the adapter refused, in release order."""
    return [record_id for record_id, _ in dataset.refused]


def _secret(tmp_path: Path) -> Path:
    """A file outside the release that a hostile row tries to reach."""
    Image.new("RGB", (4, 4), "red").save(tmp_path / "secret.png")
    return tmp_path / "secret.png"


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


# ---------------------------------------------------------------- path confinement


def test_screenspot_img_filename_outside_the_image_folder_is_refused_by_id(tmp_path):
    root = testing.write_screenspot_v2(tmp_path / "ss")
    path = root / "screenspot_web_v2.json"
    rows = json.loads(path.read_text())
    rows += [rows[0] | {"img_filename": "/etc/passwd"}, rows[0] | {"img_filename": "../screenspot_web_v2.json"}]
    path.write_text(json.dumps(rows))
    data = vista_rl.make_dataset("screenspot_v2", root=str(root))
    assert refused_ids(data) == ["screenspot_v2-web-2", "screenspot_v2-web-3"]
    assert "is absolute" in data.refused[0][1] and "'..'" in data.refused[1][1]
    assert len(data) == 6


def test_screenspot_pro_img_filename_linking_out_is_refused_by_id(tmp_path):
    root = testing.write_screenspot_pro(tmp_path / "pro")
    (root / "images" / "vscode_macos" / "link.png").symlink_to(_secret(tmp_path))
    path = root / "annotations" / "vscode_macos.json"
    rows = json.loads(path.read_text())
    rows += [rows[0] | {"id": "evil_link", "img_filename": "vscode_macos/link.png"},
             rows[0] | {"id": "evil_up", "img_filename": "vscode_macos/../../../secret.png"}]
    path.write_text(json.dumps(rows))
    data = vista_rl.make_dataset("screenspot_pro", root=str(root))
    assert refused_ids(data) == ["screenspot-pro-evil_link", "screenspot-pro-evil_up"]
    assert [r.id for r in data] == [f"screenspot-pro-vscode_macos_{n}" for n in range(3)]


def test_sat_image_cell_naming_a_host_path_is_refused_by_id(tmp_path):
    root = tmp_path / "sat"
    Image.new("RGB", (8, 8), "white").save(tmp_path / "frame.png")
    (root / "imgs").mkdir(parents=True)
    Image.new("RGB", (8, 8), "white").save(root / "imgs" / "ok.png")
    row = {"question": "Is the chair left of the table?", "answers": ["yes", "no"], "correct_answer": "no"}
    _jsonl(root / "val.jsonl", [row | {"id": "ok", "image_bytes": ["imgs/ok.png"]},
                                row | {"id": "abs", "image_bytes": ["/etc/hostname"]},
                                row | {"id": "up", "image_bytes": [{"path": "../frame.png"}]}])
    data = vista_rl.make_dataset("sat2", root=str(root), split="val")
    assert refused_ids(data) == ["sat-val-abs", "sat-val-up"]
    (record,) = data
    assert record.id == "sat-val-ok" and Path(record.images[0]) == root / "imgs" / "ok.png"


def test_blink_image_path_outside_the_release_is_refused_by_id(tmp_path):
    root = tmp_path / "blink"
    (root / "Counting").mkdir(parents=True)
    Image.new("RGB", (8, 8), "white").save(root / "Counting" / "a.png")
    row = {"question": "How many?", "choices": ["1", "2"], "answer": "(A)", "sub_task": "Counting"}
    _jsonl(root / "Counting" / "val.jsonl", [row | {"idx": "val_Counting_1", "image_1": "Counting/a.png"},
                                             row | {"idx": "val_Counting_2", "image_1": "../../etc/passwd"}])
    data = vista_rl.make_dataset("blink", root=str(root), split="val")
    assert refused_ids(data) == ["blink-val_Counting_2"] and [r.id for r in data] == ["blink-val_Counting_1"]


def test_vstar_image_linking_out_is_refused_by_id(tmp_path):
    root = testing.write_vstar(tmp_path / "vstar")
    image = root / "direct_attributes" / "sa_1.jpg"
    image.unlink()
    image.symlink_to(_secret(tmp_path))
    data = vista_rl.make_dataset("vstar_bench", root=str(root))
    assert refused_ids(data) == ["vstar-direct_attributes-sa_1"] and "symlink" in data.refused[0][1]
    assert [r.id for r in data] == ["vstar-relative_position-sa_2"]
