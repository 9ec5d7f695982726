"""The grounding adapters on records copied from the releases (fixtures/real/<id>/README.md names
each source), scored through ``grounding/screenspot-v0`` as ``vista eval`` scores them: a point
inside the target box earns the maximum, points just outside it earn less.  ScreenSpot's official
rule (point in the box, edges included) is run beside our env on the same points."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from PIL import Image

import vista_rl
from vista_rl import TaskRecord

REAL = Path(__file__).parent / "fixtures" / "real"
# what the env shows: screenshots longer than this are downscaled, answers are in shown pixels
MAX_SIDE = 1280
# ViGoRL's coordinate term is off so that the answer point alone decides the reward (max 1.0)
POINT_ONLY = {"tools": [], "grounding_reward": "single_turn", "correct_reward": 1.0, "coordinate_reward": 0.0,
              "max_side": MAX_SIDE}


def _real_records_helpers():
    """plugins/envs/datasets/tests/real_records.py (the lead's shared check), loaded by path: it is a test
    helper of another plugin, not an installed module."""
    if "real_records" in sys.modules:
        return sys.modules["real_records"]
    path = Path(__file__).parents[2] / "datasets" / "tests" / "real_records.py"
    spec = importlib.util.spec_from_file_location("real_records", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_records"] = module
    spec.loader.exec_module(module)
    return module


def fixture(name: str) -> Path:
    root = REAL / name
    assert (root / "README.md").is_file(), f"{root} needs a README naming its source and licence"
    return root


def shown_scale(record: TaskRecord) -> float:
    """The env's downscale factor for this record's screenshot (original pixels per shown pixel)."""
    with Image.open(record.images[0]) as image:
        longest = max(image.size)
    return longest / MAX_SIDE if longest > MAX_SIDE else 1.0


def points_outside(record: TaskRecord) -> list[str]:
    """Four points just outside the target box (left, right, above, below its centre), in shown
    pixels: a model that clicks next to the widget."""
    factor = shown_scale(record)
    x1, y1, x2, y2 = (float(v) / factor for v in record.answer)
    cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
    return [f"({x1 - 3:.1f}, {cy:.1f})", f"({x2 + 3:.1f}, {cy:.1f})",
            f"({cx:.1f}, {y1 - 3:.1f})", f"({cx:.1f}, {y2 + 3:.1f})"]


def official_point_in_box(bbox: list[float], img_size: list[float], point: list[float]) -> bool:
    """ScreenSpot-Pro's rule, as ``eval_sample_positive_gt`` in likaixin2000/ScreenSpot-Pro-GUI-Grounding
    ``eval_screenspot_pro.py`` (commit 588f1f2): the box is normalised by ``img_size``, the click point
    is normalised, and ``bbox[0] <= x <= bbox[2] and bbox[1] <= y <= bbox[3]`` (edges included)."""
    w, h = img_size
    box = [bbox[0] / w, bbox[1] / h, bbox[2] / w, bbox[3] / h]
    x, y = point[0] / w, point[1] / h
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def step_success(env: vista_rl.Env, seed: int, point: tuple[float, float]) -> bool:
    env.reset(seed=seed)
    return bool(env.step(f"<answer>({point[0]}, {point[1]})</answer>").info["success"])


# --- ScreenSpot-Pro --------------------------------------------------------------------------------


def test_screenspot_pro_real_annotations_convert():
    root = fixture("screenspot_pro")
    records = vista_rl.make_dataset("screenspot_pro", root=str(root))
    raw = {row["instruction"]: row for file in sorted((root / "annotations").glob("*.json"))
           for row in json.loads(file.read_text(encoding="utf-8"))}
    assert len(records) == len(raw) == 21
    by_id = {record.id: record for record in records}
    android = by_id["screenspot-pro-android_studio_macos_0"]
    assert android.answer == [1774.0, 1586.0, 2113.0, 1618.0] and android.task_type == "grounding"
    assert android.metadata["img_size"] == [3840, 2160] and android.metadata["group"] == "Dev"
    # img_filename carries the application's image folder ("android_studio_mac/..."), kept under images/
    assert Path(android.images[0]) == root / "images" / "android_studio_mac" / "screenshot_2024-11-28_15-16-55.png"
    for record in records:
        row = raw[record.question]
        assert record.answer == [float(v) for v in row["bbox"]]  # ScreenSpot-Pro boxes are already x1,y1,x2,y2
        x1, y1, x2, y2 = record.answer
        assert x1 < x2 and y1 < y2, record.id
        assert Path(record.images[0]).is_file(), record.images[0]
        assert record.metadata["data_type"] == row["ui_type"] and record.metadata["application"] == row["application"]
    # rows without an "id" (the quartus rows) still get unique ids
    assert len(by_id) == len(records)


def test_screenspot_pro_oracle_scores_max_and_outside_points_less():
    helpers = _real_records_helpers()
    records = list(vista_rl.make_dataset("screenspot_pro", root=str(fixture("screenspot_pro"))))
    checked = helpers.check_records_score_right(records, "grounding/screenspot-v0", wrong_answers=points_outside,
                                                env_config=POINT_ONLY)
    assert checked == 4 * len(records)


def test_screenspot_pro_agrees_with_the_official_rule_on_real_model_clicks():
    """The official script's own verdicts on real model clicks (the ``details`` it wrote), and the
    official rule on edge, corner and just-outside points, against our env on the same points."""
    root = fixture("screenspot_pro")
    records = list(vista_rl.make_dataset("screenspot_pro", root=str(root), applications=["quartus"]))
    seed_of = {record.question: seed for seed, record in enumerate(records)}
    env = vista_rl.make_env("grounding/screenspot-v0", records=[r.model_dump() for r in records],
                            prompt_format="no_think", **POINT_ONLY)
    try:
        details = json.loads((root / "official_eval_details.json").read_text(encoding="utf-8"))
        assert len(details) == 6
        for row in details:  # quartus screenshots are placeholders of 32 px: shown pixels are original pixels
            ours = step_success(env, seed_of[row["prompt_to_evaluate"]], tuple(row["pred"]))
            assert ours == (row["correctness"] == "correct"), row
        size = [4000, 3000]  # only the ratio matters to the official rule; any size holding the boxes
        cases = 0
        for seed, record in enumerate(records):
            x1, y1, x2, y2 = record.answer
            for point in [(x1, y1), (x2, y2), (x1, y2), ((x1 + x2) / 2, (y1 + y2) / 2),
                          (x1 - 1, y1), (x2 + 1, y2), (x1, y1 - 1), (x2, y2 + 1)]:
                assert step_success(env, seed, point) == official_point_in_box(record.answer, size, point), \
                    (record.id, point)
                cases += 1
        assert cases == 8 * len(records)
    finally:
        env.close()


def test_screenspot_pro_4k_screenshot_is_judged_in_original_pixels():
    """The 3840x2160 record is shown at 1280x720: the shown-pixel oracle point wins, the same point
    read as original pixels misses."""
    records = [r for r in vista_rl.make_dataset("screenspot_pro", root=str(fixture("screenspot_pro")))
               if r.metadata["application"] == "android_studio"]
    env = vista_rl.make_env("grounding/screenspot-v0", records=[r.model_dump() for r in records],
                            prompt_format="no_think", **POINT_ONLY)
    try:
        observation, info = env.reset(seed=0)
        assert observation.images[0].size == (1280, 720) and info["scale"] == pytest.approx(3.0)
        x1, y1, x2, y2 = records[0].answer
        assert step_success(env, 0, ((x1 + x2) / 6, (y1 + y2) / 6))
        assert not step_success(env, 0, ((x1 + x2) / 2, (y1 + y2) / 2))
    finally:
        env.close()


# --- ScreenSpot v2 ---------------------------------------------------------------------------------


def test_screenspot_v2_real_record_box_is_xywh():
    root = fixture("screenspot_v2")
    (record,) = vista_rl.make_dataset("screenspot_v2", root=str(root), platforms=["desktop"])
    assert record.question == "close this window" and record.metadata["data_type"] == "icon"
    assert record.answer == [910.0, 78.0, 954.0, 112.0]  # [x, y, w, h] = [910, 78, 44, 34] in the release
    assert Path(record.images[0]).is_file()
    helpers = _real_records_helpers()
    assert helpers.check_records_score_right([record], "grounding/screenspot-v0", wrong_answers=points_outside,
                                             env_config=POINT_ONLY) == 4
