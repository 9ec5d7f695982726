import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from vista_plugin_datasets import testing
from vista_plugin_datasets.common import judge_for

import vista_rl
from vista_rl import TaskRecord


def test_chartqa_release_layout(tmp_path):
    root = testing.write_chartqa(tmp_path)
    data = vista_rl.make_dataset("chartqa", root=str(root), split="test")
    assert len(data) == 3 and data.name == "chartqa-test"
    first = data[0]
    assert isinstance(first, TaskRecord)
    assert first.question == "What is the value of Japan in 2019?" and first.answer == "37.5"
    assert first.task_type == "numeric" and Path(first.images[0]).name == "41699051005347.png"
    assert Image.open(first.images[0]).size == (160, 120)
    assert data[1].task_type == "short_answer"
    assert data[2].answer == "1,250" and data[2].task_type == "numeric" and data[2].metadata["source"] == "augmented"
    assert len(vista_rl.make_dataset("chartqa", root=str(root), subset="human")) == 2
    with pytest.raises(FileNotFoundError, match="dataset root"):
        vista_rl.make_dataset("chartqa", root=str(tmp_path / "nowhere"))


def test_scienceqa_release_layout(tmp_path):
    root = testing.write_scienceqa(tmp_path / "sqa")
    data = vista_rl.make_dataset("scienceqa", root=str(root), split="test")
    assert [r.id for r in data] == ["scienceqa-5", "scienceqa-9"]
    mapped = data[0]
    assert mapped.answer == "B" and mapped.choices == ["Utah", "Maine", "Texas"]
    assert mapped.task_type == "multiple_choice" and Path(mapped.images[0]).exists()
    assert data[1].images == [] and data[1].question.startswith("Context: Alphabetical order.")
    assert len(vista_rl.make_dataset("scienceqa", root=str(root), with_image_only=True)) == 1


def test_geometry3k_release_layout(tmp_path):
    root = testing.write_geometry3k(tmp_path / "geometry3k")
    data = vista_rl.make_dataset("geometry3k", root=str(root), split="test")
    assert [r.id for r in data] == ["geometry3k-2401", "geometry3k-2402"]
    assert data[0].answer == "B" and data[0].choices == ["3", "6", "9", "12"]
    assert data[0].metadata["precise_value"] == [3.0, 6.0, 9.0, 12.0]
    assert Path(data[1].images[0]).name == "img_diagram.png"


def test_aokvqa_release_layout(tmp_path):
    root, coco = testing.write_aokvqa(tmp_path / "aokvqa")
    mc = vista_rl.make_dataset("aokvqa", root=str(root), coco_dir=str(coco), split="val")
    assert mc[0].answer == "D" and mc[0].choices[3] == "cigarette"
    assert mc[0].images[0].endswith("val2017/000000461751.jpg") and Path(mc[0].images[0]).exists()
    direct = vista_rl.make_dataset("aokvqa", root=str(root), coco_dir=str(coco), mode="direct")
    assert direct[0].answer == ["cigarette"] * 9 + ["smoke"] and direct[0].task_type == "short_answer"
    assert judge_for(direct[0]) == "vqa_accuracy" and judge_for(mc[0]) == "multiple_choice"
    assert vista_rl.make_judge("vqa_accuracy")("smoke", direct[0].answer).score == pytest.approx(0.3)


def test_records_from_jsonl_and_parquet_with_image_bytes(tmp_path):
    image_path = tmp_path / "img.png"
    Image.new("RGB", (8, 8), "red").save(image_path)
    rows = [{"id": "q1", "dataset": "mine", "images": ["img.png"], "question": "Colour?", "answer": "red",
             "task_type": "short_answer", "extra": 5}]
    jsonl = tmp_path / "records.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    data = vista_rl.make_dataset("records", path=str(jsonl))
    assert data[0].images == [str(tmp_path / "img.png")] and data[0].metadata["extra"] == 5
    # an HF-style parquet export: other column names, image bytes inline
    table = pa.table({"query": ["How many?"], "label": ["3"],
                      "image": [{"bytes": image_path.read_bytes(), "path": None}]})
    parquet = tmp_path / "test-00000.parquet"
    pq.write_table(table, parquet)
    loaded = vista_rl.make_dataset("records", path=str(parquet), dataset="hf-chartqa",
                                columns={"question": "query", "answer": "label", "images": "image"},
                                image_cache_dir=str(tmp_path / "cache"))
    record = loaded[0]
    assert record.question == "How many?" and record.answer == "3" and record.dataset == "hf-chartqa"
    assert Image.open(record.images[0]).getpixel((0, 0)) == (255, 0, 0)
    assert loaded.for_seed(7) is record
    out = loaded.to_jsonl(tmp_path / "round.jsonl")
    assert vista_rl.make_dataset("records", path=str(out))[0].question == "How many?"


def test_items_come_from_this_distribution():
    for dataset_id in ("records", "chartqa", "scienceqa", "geometry3k", "aokvqa"):
        assert vista_rl.host().spec("datasets", dataset_id).distribution == "vista-plugin-datasets"


def test_jsonl_rows_keep_their_own_keys_and_bad_lines_are_named(tmp_path):
    rows = [{"id": "a", "dataset": "d", "question": "q?", "answer": ["x"] * 10, "metadata": {"judge": "vqa_accuracy"}},
            {"id": "b", "dataset": "d", "question": "q?", "answer": "3", "metadata": {"precision": 1.0}}]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    data = vista_rl.make_dataset("records", path=str(path))
    assert data[0].metadata == {"judge": "vqa_accuracy"} and data[1].metadata == {"precision": 1.0}
    assert data[0].answer == ["x"] * 10 and data[1].answer == "3"  # a column whose type varies is fine
    path.write_text(json.dumps(rows[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match="mixed.jsonl:2: not JSON"):
        vista_rl.make_dataset("records", path=str(path))
