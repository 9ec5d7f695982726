"""``vista data convert``: raw release -> unified records on disk -> ``vista eval`` on them."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image
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
    # the printed eval line is the same records_path line as for copied images (the operator's own file)
    assert f"env.config.records_path={tmp_path / 'out' / 'aokvqa-val.jsonl'}" in result.output
    assert "image_root" not in result.output
    # read as a release (no absolute_images), absolute paths still load only inside named roots
    with pytest.raises(ValueError, match="every record was refused"):
        vista_rl.make_dataset("records", path=str(tmp_path / "out" / "aokvqa-val.jsonl"))
    loaded = vista_rl.make_dataset("records", path=str(tmp_path / "out" / "aokvqa-val.jsonl"),
                                   image_root=[str(root), str(coco)])
    assert loaded[0].images == row["images"]
    own = vista_rl.make_dataset("records", path=str(tmp_path / "out" / "aokvqa-val.jsonl"), absolute_images=True)
    assert own[0].images == row["images"]


def _records_release(folder: Path) -> Path:
    """A records file as a user writes one: images named relative to it, one in a sub-folder."""
    (folder / "pics").mkdir(parents=True)
    Image.new("RGB", (32, 32), "red").save(folder / "pics" / "red.png")
    Image.new("RGB", (32, 32), "blue").save(folder / "blue.png")
    rows = [{"id": "r1", "dataset": "mine", "images": ["pics/red.png"], "question": "What colour?", "answer": "red"},
            {"id": "r2", "dataset": "mine", "images": ["blue.png"], "question": "What colour?", "answer": "blue"}]
    path = folder / "mine.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("images", ["copy", "reference"])
def test_convert_then_eval_for_both_image_modes(tmp_path, images):
    """Issue 34 item 7: `vista data convert records FILE DST --images reference` wrote absolute paths
    that `vista eval` then refused for every record.  Both modes' output now evaluates as printed:
    through `--set env.config.records_path=` and through a run config file that names it."""
    release = _records_release(tmp_path / "release")
    dst = tmp_path / "converted"
    result = _cli("data", "convert", "records", release, dst, "--images", images)
    assert result.exit_code == 0, result.output
    (jsonl,) = dst.glob("*.jsonl")
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [row["id"] for row in rows] == ["r1", "r2"]
    for row in rows:
        path = Path(row["images"][0])
        assert path.is_absolute() == (images == "reference")
        assert (path if path.is_absolute() else dst / path).is_file()
    assert f"--set env.config.records_path={jsonl}\n" in result.output  # one line, ready to copy
    summary = _eval("vqa/short-answer-v0", jsonl, tmp_path / "eval", 2)
    assert summary["success_rate"]["value"] == 1.0
    judged = [json.loads(line) for line in (tmp_path / "eval" / "trajectories.jsonl").read_text().splitlines()]
    assert len(judged) == 2
    # the same file named in a run config (the operator's own) evaluates too
    config = tmp_path / "run.yaml"
    config.write_text(f"env:\n  id: vqa/short-answer-v0\n  config:\n    records_path: {jsonl}\n")
    result = _cli("eval", config, "--model", "scripted:oracle", "--episodes", 2, "--max-turns", 2,
                  "--out", tmp_path / "eval-config")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "eval-config" / "metrics.json").read_text())["success_rate"]["value"] == 1.0


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


# --- mixed releases: one env for both kinds of record -----------------------------------------------


def _mathvista_real(root: Path) -> Path:
    from real_records import fixture

    return fixture("mathvista")


@pytest.mark.parametrize(("name", "writer", "count"), [
    ("mathvista", _mathvista_real, 11), ("tabmwp", testing.write_tabmwp, 3), ("iconqa", testing.write_iconqa, 3),
])
def test_mixed_releases_convert_name_records_env_and_score_right(tmp_path, name, writer, count):
    from real_records import check_records_score_right

    result = _cli("data", "convert", name, writer(tmp_path / "raw"), tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "eval: vista eval --env vqa/records-v0" in result.output and "multiple_choice" in result.output
    (jsonl,) = (tmp_path / "out").glob("*.jsonl")
    summary = _eval("vqa/records-v0", jsonl, tmp_path / "eval", count)
    assert summary["success_rate"]["value"] == 1.0
    records = list(vista_rl.make_dataset("records", path=str(jsonl)))
    assert {r.task_type for r in records} >= {"multiple_choice"} and len(records) == count
    assert check_records_score_right(records, "vqa/records-v0") > 0  # wrong options and numbers score below


def test_convert_names_the_env_by_the_kinds_it_wrote(tmp_path):
    assert "--env vqa/multiple-choice-v0" in _cli("data", "convert", "ai2d", testing.write_ai2d(tmp_path / "a"),
                                                 tmp_path / "oa").output
    assert "--env vqa/short-answer-v0" in _cli("data", "convert", "chartqa", testing.write_chartqa(tmp_path / "c"),
                                              tmp_path / "oc").output


# --- paths confined: reads inside SRC (or a named folder), writes inside DST ------------------------


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def test_chartqa_records_naming_paths_outside_the_release_are_refused_not_copied(tmp_path):
    src = testing.write_chartqa(tmp_path / "raw")
    secret = tmp_path / "secret.png"
    Image.new("RGB", (4, 4), "red").save(secret)
    (src / "test" / "png" / "link.png").symlink_to(secret)  # a symlink inside the release, leading out
    (src / "test" / "x.png").write_bytes(secret.read_bytes())  # what "../x.png" names from png/
    human = json.loads((src / "test" / "test_human.json").read_text())
    human += [{"imgname": "/etc/passwd", "query": "q1", "label": "1"},
              {"imgname": "../x.png", "query": "q2", "label": "2"},
              {"imgname": "../../../secret.png", "query": "q3", "label": "3"},
              {"imgname": "link.png", "query": "q4", "label": "4"}]
    (src / "test" / "test_human.json").write_text(json.dumps(human))
    outside_before = _files(tmp_path)
    result = _cli("data", "convert", "chartqa", src, tmp_path / "out")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "out" / "chartqa-test.jsonl").read_text().splitlines()]
    assert [row["question"] for row in rows] == ["What is the value of Japan in 2019?",
                                                "Which country has the highest share?",
                                                "What is the sum of the two bars?"]
    for index in (2, 3, 4, 5):  # the four hostile records, each refused by name, the run went on
        assert f"refused chartqa-test-human-{index}" in result.output
    assert "4 record(s) refused" in result.output
    copied = _files(tmp_path / "out")
    assert not any(p.name in {"passwd", "x.png", "secret.png", "link.png"} for p in copied)
    assert all(b"root:" not in p.read_bytes() for p in copied if p.is_file())
    assert _files(tmp_path) - copied == outside_before  # nothing written beside DST


def test_a_dataset_name_with_dot_dot_writes_nothing_outside_dst(tmp_path):
    release = tmp_path / "deep" / "er" / "release"
    release.mkdir(parents=True)
    Image.new("RGB", (4, 4), "blue").save(release / "img.png")
    rows = [{"id": "evil", "dataset": "../../../x", "images": ["img.png"], "question": "Colour?", "answer": "blue"},
            {"id": "abs", "dataset": "/tmp/y", "images": ["img.png"], "question": "Colour?", "answer": "blue"}]
    (release / "evil.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    dst = tmp_path / "deep" / "er" / "out"
    before = _files(tmp_path)
    result = convert("records", release / "evil.jsonl", dst)
    assert result.written == 2 and not result.refused
    written = _files(tmp_path) - before
    assert written and all(p.resolve().is_relative_to(dst.resolve()) for p in written)
    placed = [json.loads(line)["images"][0] for line in result.path.read_text().splitlines()]
    assert placed == ["images/x/img.png", "images/tmp_y/img.png"]


def test_records_files_naming_host_paths_are_refused_per_record(tmp_path):
    Image.new("RGB", (4, 4), "blue").save(tmp_path / "ok.png")
    rows = [{"id": "fine", "dataset": "d", "images": ["ok.png"], "question": "q", "answer": "a"},
            {"id": "host", "dataset": "d", "images": ["/etc/hostname"], "question": "q", "answer": "a"},
            {"id": "up", "dataset": "d", "images": ["../ok.png"], "question": "q", "answer": "a"}]
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "r.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (sub / "ok.png").write_bytes((tmp_path / "ok.png").read_bytes())
    data = vista_rl.make_dataset("records", path=str(sub / "r.jsonl"))
    assert [r.id for r in data] == ["fine"]
    assert [record_id for record_id, _ in data.refused] == ["host", "up"]
    assert "record host: path '/etc/hostname' is absolute" in data.refused[0][1]
    wider = vista_rl.make_dataset("records", path=str(sub / "r.jsonl"), image_root=[str(sub), str(tmp_path)])
    assert [r.id for r in wider] == ["fine"]  # a second root admits absolute paths inside it, never '..'
    # the operator's own file (records_path) keeps absolute paths as written; '..' stays refused
    own = vista_rl.make_dataset("records", path=str(sub / "r.jsonl"), absolute_images=True)
    assert [r.id for r in own] == ["fine", "host"] and own[1].images == ["/etc/hostname"]
    assert [record_id for record_id, _ in own.refused] == ["up"]


def test_resolve_inside_is_the_one_rule(tmp_path):
    from vista_plugin_datasets.common import PathRefused, resolve_inside

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "out").symlink_to("/etc")
    assert resolve_inside(tmp_path, "a/b.png", "r1") == tmp_path / "a" / "b.png"
    for bad, why in [("/etc/passwd", "absolute"), ("C:\\x.png", "absolute"), ("\\\\host\\x", "absolute"),
                     ("../x.png", "'..'"), ("a/../../x", "'..'"), ("a\\..\\..\\x", "'..'"),
                     ("a/out/passwd", "symlink"), ("", "empty"), ("a\x00b", "NUL"),
                     ("a\ud800.png", "not a valid file name")]:
        with pytest.raises(PathRefused, match=why) as refused:
            resolve_inside(tmp_path, bad, "r1")
        assert refused.value.record_id == "r1" and "record r1" in str(refused.value)


def test_a_lone_surrogate_in_a_release_round_trips_and_costs_no_other_record(tmp_path):
    """A release's JSON may hold ``"\\ud800"``; UTF-8 cannot encode it, and it used to fail the whole
    file (issue 22 fuzz: 300 of 300 records lost).  Now it is written escaped and read back exactly."""
    src = testing.write_chartqa(tmp_path / "raw")
    human = src / "test" / "test_human.json"
    rows = json.loads(human.read_text())
    rows[0]["query"] = "What is \ud800 here?"
    human.write_text(json.dumps(rows))
    result = convert("chartqa", src, tmp_path / "out", options={"split": "test"})
    assert result.written == 3
    back = list(vista_rl.make_dataset("records", path=str(result.path)))
    assert {record.question for record in back} >= {"What is \ud800 here?"}


def test_a_dataset_says_what_it_is():
    """``repr`` names the dataset and its size (it was lost once, nested by mistake in a function)."""
    from vista_plugin_datasets.records import TaskDataset

    record = vista_rl.TaskRecord(id="x", dataset="d", question="q")
    assert repr(TaskDataset("demo", [record])) == "TaskDataset('demo', 1 records)"
