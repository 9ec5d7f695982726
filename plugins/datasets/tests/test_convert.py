"""``vista data convert``: raw release -> unified records on disk -> ``vista eval`` on them."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from vista_plugin_datasets import testing
from vista_plugin_datasets.convert import convert

import vista_rl
from vista_rl.cli import build_cli


def _cli(*args):
    return CliRunner().invoke(build_cli(), list(map(str, args)))


def _eval(env_id, records, out, episodes):
    result = _cli("eval", "--env", env_id, "--model", "scripted:oracle", "--episodes", episodes, "--max-turns", 2,
                  "--out", out, "--set", f"env.config.records_path={records}")
    assert result.exit_code == 0, result.output
    return json.loads((Path(out) / "metrics.json").read_text())


@pytest.mark.parametrize(("name", "writer", "env_id", "count", "judge"), [
    ("vizwiz", testing.write_vizwiz, "vqa/short-answer-v0", 2, "vqa_accuracy"),
    ("figureqa", testing.write_figureqa, "vqa/multiple-choice-v0", 2, "multiple_choice"),
    ("docvqa", testing.write_docvqa, "vqa/short-answer-v0", 2, "anls"),
])
def test_convert_then_eval_end_to_end(tmp_path, name, writer, env_id, count, judge):
    src = writer(tmp_path / "raw")
    dst = tmp_path / "converted"
    result = _cli("data", "convert", name, src, dst)
    assert result.exit_code == 0, result.output
    (jsonl,) = dst.glob("*.jsonl")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert len(rows) == count and f"{judge} {count}" in result.output
    for row in rows:  # images copied next to the records and referenced relative to them
        assert all(not Path(p).is_absolute() and (dst / p).is_file() for p in row["images"])
    # the raw release can go: the converted folder stands alone
    moved = tmp_path / "moved"
    dst.rename(moved)
    loaded = vista_rl.make_dataset("records", path=str(moved / jsonl.name))
    assert [r.id for r in loaded] == [row["id"] for row in rows]
    assert loaded[0].answer == rows[0]["answer"] and Path(loaded[0].images[0]).is_file()
    summary = _eval(env_id, moved / jsonl.name, tmp_path / "eval", count)
    assert summary["success_rate"]["value"] == 1.0
    judged = [json.loads(line) for line in (tmp_path / "eval" / "trajectories.jsonl").read_text().splitlines()]
    assert len(judged) == count


def test_convert_options_split_limit_and_reference_mode(tmp_path):
    root, coco = testing.write_aokvqa(tmp_path / "aokvqa")
    result = _cli("data", "convert", "aokvqa", root, tmp_path / "out", "--split", "val", "-o", f"coco_dir={coco}",
                  "-o", "mode=direct", "--limit", 1, "--images", "reference")
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in (tmp_path / "out" / "aokvqa-val.jsonl").read_text().splitlines()]
    assert row["metadata"]["judge"] == "vqa_accuracy" and len(row["answer"]) == 10
    assert Path(row["images"][0]).is_absolute() and Path(row["images"][0]).is_file()
    assert not (tmp_path / "out" / "images").exists()


def test_images_outside_src_and_pickled_diagrams_are_copied(tmp_path):
    root, coco = testing.write_aokvqa(tmp_path / "aokvqa")
    inside = convert("aokvqa", root, tmp_path / "a", {"coco_dir": str(coco)})
    assert inside.written == 2  # COCO inside SRC keeps its path
    assert (tmp_path / "a" / "images" / "aokvqa" / "coco" / "val2017" / "000000461751.jpg").is_file()
    coco_outside = shutil.move(coco, tmp_path / "coco")
    outside = convert("aokvqa", root, tmp_path / "b", {"coco_dir": str(coco_outside)})
    rows = [json.loads(line) for line in outside.path.read_text().splitlines()]
    assert rows[0]["images"][0].startswith("images/aokvqa/external/")
    assert rows[0]["images"][0].endswith("/000000461751.jpg") and (tmp_path / "b" / rows[0]["images"][0]).is_file()
    geo = convert("geoqa", testing.write_geoqa(tmp_path / "geoqa"), tmp_path / "g")
    rows = [json.loads(line) for line in geo.path.read_text().splitlines()]
    assert rows[0]["images"][0].startswith("images/geoqa/") and (tmp_path / "g" / rows[0]["images"][0]).is_file()


def test_a_missing_image_skips_that_record_not_the_run(tmp_path):
    src = testing.write_vizwiz(tmp_path / "raw")
    (src / "val" / "VizWiz_val_00000001.jpg").unlink()
    result = _cli("data", "convert", "vizwiz", src, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "skipped vizwiz-VizWiz_val_00000001" in result.output
    assert len((tmp_path / "out" / "vizwiz-val.jsonl").read_text().splitlines()) == 1


def test_bad_input_is_a_clear_error(tmp_path):
    result = _cli("data", "convert", "vizwiz", tmp_path, tmp_path / "out")
    assert result.exit_code != 0 and "does not exist" in result.output
    result = _cli("data", "convert", "vizwiz", tmp_path, tmp_path / "out", "-o", "nokey")
    assert result.exit_code != 0 and "KEY=VALUE" in result.output
    result = _cli("data", "convert", "no-such-dataset", tmp_path, tmp_path / "out")
    assert result.exit_code != 0
