import json

import pytest
from PIL import Image
from vista_plugin_grounding.testing import (
    write_blink,
    write_sat,
    write_screenspot_pro,
    write_screenspot_v2,
    write_vstar,
)

import vista_rl
from vista_rl_sdk import check_env


def test_sat_parquet_release(tmp_path):
    root = write_sat(tmp_path / "SAT")
    records = vista_rl.make_dataset("sat2", root=str(root), split="val")
    assert len(records) == 2
    first, second = records[0], records[1]
    assert first.answer == "no" and first.choices == ["yes", "no"] and first.task_type == "multiple_choice"
    assert len(second.images) == 2 and second.metadata["question_type"] == "ego_movement"
    with Image.open(first.images[0]) as image:
        assert image.getpixel((90, 60)) == (173, 216, 230)  # lightblue: the image bytes came through
    env = vista_rl.make_env("vqa/multiple-choice-v0", dataset="sat2", dataset_config={"root": str(root)})
    env.reset(seed=0)
    assert env.step(env.oracle_response()).info["success"]


def test_sat_rejects_an_answer_outside_the_options(tmp_path):
    import datasets

    datasets.Dataset.from_dict({"image_bytes": [[]], "question": ["q"], "answers": [["a", "b"]],
                                "correct_answer": ["c"], "question_type": ["x"]}).to_parquet(str(tmp_path / "val.parquet"))
    with pytest.raises(ValueError, match="not one of"):
        vista_rl.make_dataset("sat2", root=str(tmp_path))


def test_blink_release(tmp_path):
    root = write_blink(tmp_path / "BLINK")
    records = vista_rl.make_dataset("blink", root=str(root))
    by_task = {r.metadata["sub_task"]: r for r in records}
    assert by_task["Relative_Depth"].answer == "B" and len(by_task["Relative_Depth"].images) == 1
    assert by_task["Multi-view_Reasoning"].answer == "A" and len(by_task["Multi-view_Reasoning"].images) == 2
    only = vista_rl.make_dataset("blink", root=str(root), subtasks=["Relative_Depth"])
    assert len(only) == 1
    check_env("vqa/multiple-choice-v0", {"dataset": "blink", "dataset_config": {"root": str(root)}}, seeds=(0, 1))


def test_screenspot_v2_boxes_become_corners_and_the_env_grounds_them(tmp_path):
    root = write_screenspot_v2(tmp_path / "ScreenSpot-v2")
    records = vista_rl.make_dataset("screenspot_v2", root=str(root))
    assert len(records) == 6 and {r.metadata["platform"] for r in records} == {"desktop", "mobile", "web"}
    raw = json.loads((root / "screenspot_desktop_v2.json").read_text())[0]
    x, y, w, h = raw["bbox"]
    assert records[0].answer == [x, y, x + w, y + h] and records[0].task_type == "grounding"
    config = {"dataset": "screenspot_v2", "dataset_config": {"root": str(root)}, "max_side": 800}
    check_env("grounding/screenspot-v0", config, seeds=(0, 1))
    env = vista_rl.make_env("grounding/screenspot-v0", **config, tools=[])
    observation, info = env.reset(seed=0)
    assert max(observation.images[0].size) == 800 and info["scale"] == pytest.approx(2.0)
    result = env.step(env.oracle_response())  # point in shown pixels, judged in original pixels
    assert result.info["success"]
    env.reset(seed=0)
    sx, sy = (v * 2 for v in info["target_point"])  # an original-pixel point misses in the shown frame
    assert not env.step(f"<think>({sx}, {sy})</think><answer>({sx}, {sy})</answer>").info["success"]


def test_screenspot_pro_release(tmp_path):
    root = write_screenspot_pro(tmp_path / "ScreenSpot-Pro")
    records = vista_rl.make_dataset("screenspot_pro", root=str(root))
    assert len(records) == 3 and records[0].metadata["application"] == "vscode"
    raw = json.loads((root / "annotations" / "vscode_macos.json").read_text())
    assert records[1].answer == raw[1]["bbox"]
    with pytest.raises(ValueError, match="no records"):
        vista_rl.make_dataset("screenspot_pro", root=str(root), applications=["photoshop"])


def test_vstar_release(tmp_path):
    root = write_vstar(tmp_path / "vstar_bench")
    records = vista_rl.make_dataset("vstar_bench", root=str(root))
    assert len(records) == 2
    for record in records:
        assert record.choices[record.answer] == record.metadata["original_options"][0]
    relative = next(r for r in records if r.metadata["category"] == "relative_position")
    assert relative.metadata["target_boxes"][1] == [60.0, 30.0, 80.0, 50.0]
    check_env("vqa/multiple-choice-v0", {"dataset": "vstar_bench", "dataset_config": {"root": str(root)}}, seeds=(0, 1))


def test_missing_roots_say_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="dataset root"):
        vista_rl.make_dataset("screenspot_v2", root=str(tmp_path))
    with pytest.raises(FileNotFoundError, match="no data files"):
        vista_rl.make_dataset("sat2", root=str(tmp_path))


def test_screenspot_zoom_cuts_from_the_original_screenshot(tmp_path):
    import numpy as np

    from vista_rl import ToolContext, parse_response

    root = write_screenspot_v2(tmp_path / "ScreenSpot-v2")
    env = vista_rl.make_env("grounding/screenspot-v0", dataset="screenspot_v2",
                            dataset_config={"root": str(root)}, max_side=800)
    observation, info = env.reset(seed=1)
    images = list(observation.images)
    zoom = env.oracle_response()
    call = parse_response(zoom).tool_calls[0]
    tool = vista_rl.make_tool(call.name)
    sharp = tool(call.arguments, ToolContext(images=images, metadata=env.tool_context_metadata())).images[0]
    blurry = tool(call.arguments, ToolContext(images=images)).images[0]  # from the downscaled view

    def edge_energy(image):
        grey = np.asarray(image.convert("L")).astype(float)
        return float(np.abs(np.diff(grey, axis=1)).mean() + np.abs(np.diff(grey, axis=0)).mean())

    assert sharp.size == blurry.size and edge_energy(sharp) > 1.2 * edge_energy(blurry)
    result = env.step(zoom)
    assert not result.done and result.info["action_valid"] and result.info["tool_calls"]
    final = env.step(env.oracle_response())
    assert final.info["success"] and final.reward == pytest.approx(0.6 + 0.4)
