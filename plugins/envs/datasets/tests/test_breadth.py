"""The VISTA-Gym task-breadth adapters, each on a fixture in its dataset's public release layout,
and the judge each record is paired with."""

import json
import pickle
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image
from vista_plugin_datasets import ADAPTERS, testing
from vista_plugin_datasets.common import judge_for
from vista_plugin_datasets.geometry import read_problem_pickle

import vista_rl


def _figureqa(tmp):
    return {"root": str(testing.write_figureqa(tmp))}


def _clevr_math(tmp):
    root, clevr_dir = testing.write_clevr_math(tmp)
    return {"root": str(root), "clevr_dir": str(clevr_dir)}


def _ai2d(tmp):
    root = testing.write_ai2d(tmp)
    return {"root": str(root)}


# id -> (fixture -> loader kwargs, expected count, expected judges in record order)
CASES = {
    "figureqa": (_figureqa, 2, ["multiple_choice"] * 2),
    "plotqa": (lambda t: {"root": str(testing.write_plotqa(t))}, 3, ["relaxed_numeric"] * 3),  # "2012" too
    "geoqa": (lambda t: {"root": str(testing.write_geoqa(t))}, 2, ["multiple_choice"] * 2),
    "unigeo": (lambda t: {"root": str(testing.write_unigeo(t))}, 1, ["multiple_choice"]),
    "mapqa": (lambda t: {"root": str(testing.write_mapqa(t))}, 3, ["set_match", "relaxed_numeric", "exact"]),
    "vizwiz": (lambda t: {"root": str(testing.write_vizwiz(t))}, 2, ["vqa_accuracy"] * 2),
    "docvqa": (lambda t: {"root": str(testing.write_docvqa(t))}, 2, ["anls"] * 2),
    "clevr": (lambda t: {"root": str(testing.write_clevr(t))}, 2, ["exact", "relaxed_numeric"]),
    "clevr_math": (_clevr_math, 2, ["math"] * 2),
    "tabmwp": (lambda t: {"root": str(testing.write_tabmwp(t))}, 3, ["multiple_choice", "math", "math"]),
    "ai2d": (_ai2d, 3, ["multiple_choice"] * 3),
    "iconqa": (lambda t: {"root": str(testing.write_iconqa(t))}, 3, ["multiple_choice", "math", "multiple_choice"]),
    "mathvista": (lambda t: {"root": str(testing.write_mathvista(t))}, 3, ["math", "multiple_choice", "exact"]),
}


def _oracle(record):
    """What a perfect model answers: the option letter, the most-voted answer, or the answer."""
    if isinstance(record.answer, list):
        return Counter(record.answer).most_common(1)[0][0]
    return record.answer


@pytest.mark.parametrize("dataset_id", sorted(CASES))
def test_adapter_reads_its_release_and_pairs_the_right_judge(tmp_path, dataset_id):
    make_config, count, judges = CASES[dataset_id]
    data = vista_rl.make_dataset(dataset_id, **make_config(tmp_path / dataset_id))
    assert len(data) == count
    assert [judge_for(record) for record in data] == judges
    for record in data:
        assert record.dataset == dataset_id and record.question and record.images
        for image in record.images:
            assert Image.open(image).size[0] > 0
        context = {"choices": record.choices} if record.choices else {}
        judge = vista_rl.make_judge(judge_for(record))
        assert judge(_oracle(record), record.answer, **context).score == 1.0, record
        assert judge("zzz wrong", record.answer, **context).score < 1.0
    assert len(vista_rl.make_dataset(dataset_id, **make_config(tmp_path / f"{dataset_id}-2"), limit=1)) == 1


def test_answer_encodings(tmp_path):
    figureqa = vista_rl.make_dataset("figureqa", root=str(testing.write_figureqa(tmp_path / "f")))
    assert [r.answer for r in figureqa] == ["A", "B"] and figureqa[0].choices == ["Yes", "No"]  # 1 = yes
    assert figureqa[0].images[0].endswith("validation1/png/0.png")
    plotqa = vista_rl.make_dataset("plotqa", root=str(testing.write_plotqa(tmp_path / "p")))
    assert [r.answer for r in plotqa] == ["26", "2012", "1.2543"]
    assert plotqa[0].metadata["template"] == "data_retrieval" and plotqa[2].metadata["type"] == "dot_line"
    qa_file = tmp_path / "p" / "test" / "qa_pairs_V2.json"  # a bare list under the lower-case name reads the same
    (tmp_path / "p" / "test" / "qa_pairs_v2.json").write_text(json.dumps(json.loads(qa_file.read_text())["qa_pairs"]))
    qa_file.unlink()
    assert [r.answer for r in vista_rl.make_dataset("plotqa", root=str(tmp_path / "p"))] == ["26", "2012", "1.2543"]
    geoqa = vista_rl.make_dataset("geoqa", root=str(testing.write_geoqa(tmp_path / "g")))
    assert geoqa[0].answer == "C" and geoqa[0].choices[2] == "130°" and geoqa[0].question.startswith("如图")
    assert Image.open(geoqa[0].images[0]).size == (64, 48)  # the array became a PNG
    unigeo = vista_rl.make_dataset("unigeo", root=str(testing.write_unigeo(tmp_path / "u")))
    assert unigeo[0].question.startswith("As shown in the figure")  # English preferred
    mapqa = vista_rl.make_dataset("mapqa", root=str(testing.write_mapqa(tmp_path / "m")))
    assert mapqa[0].answer == "Texas, Ohio" and mapqa[0].metadata["answer_list"] == ["Texas", "Ohio"]
    assert mapqa[1].answer == "12" and mapqa[0].images[0].endswith("MapQA_S/images/map_17.png")
    assert vista_rl.make_judge(judge_for(mapqa[0]))("Ohio and Texas", mapqa[0].answer).score == 1.0
    vizwiz = vista_rl.make_dataset("vizwiz", root=str(testing.write_vizwiz(tmp_path / "v")))
    assert Counter(vizwiz[0].answer) == {"soy milk": 7, "milk": 2, "unanswerable": 1}
    assert len(vista_rl.make_dataset("vizwiz", root=str(tmp_path / "v"), answerable_only=True)) == 1
    assert vista_rl.make_judge("vqa_accuracy")("milk", vizwiz[0].answer).score == pytest.approx(0.6)
    docvqa = vista_rl.make_dataset("docvqa", root=str(testing.write_docvqa(tmp_path / "d")))
    assert docvqa[0].id == "docvqa-49153" and docvqa[0].images[0].endswith("documents/pybv0228_81.png")
    assert vista_rl.make_judge("anls")("0.23", docvqa[0].answer).score == pytest.approx(0.75)
    flat = tmp_path / "d" / "spdocvqa_images"  # images unpacked flat, apart from the questions
    (tmp_path / "d" / "documents").rename(flat)
    moved = vista_rl.make_dataset("docvqa", root=str(tmp_path / "d"), image_dir=str(flat))
    assert moved[0].images[0] == str(flat / "pybv0228_81.png")
    clevr = vista_rl.make_dataset("clevr", root=str(testing.write_clevr(tmp_path / "c")))
    assert clevr[1].answer == "3" and clevr[0].images[0].endswith("images/val/CLEVR_val_000000.png")
    math = vista_rl.make_dataset("clevr_math", **_clevr_math(tmp_path / "cm"))
    assert [r.answer for r in math] == ["5", "4"] and math[0].metadata["template_filename"] == "subtraction.json"


def test_answer_encodings_science(tmp_path):
    tabmwp = vista_rl.make_dataset("tabmwp", root=str(testing.write_tabmwp(tmp_path / "t")))
    assert tabmwp[0].answer == "B" and tabmwp[0].choices == ["Rudy", "Eve"]  # answer text -> letter
    assert tabmwp[1].answer == "1.35" and tabmwp[1].metadata["unit"] == "$"
    assert vista_rl.make_judge("math")("3/7", tabmwp[2].answer).score == 1.0
    ai2d = vista_rl.make_dataset("ai2d", root=str(testing.write_ai2d(tmp_path / "a")))
    assert [r.id for r in ai2d] == ["ai2d-0.png-0", "ai2d-0.png-1", "ai2d-12.png-0"]  # numeric file order
    assert "/abc_images/" in ai2d[1].images[0] and "/images/" in ai2d[0].images[0] and ai2d[1].answer == "D"
    test = vista_rl.make_dataset("ai2d", root=str(tmp_path / "a"), test_ids=str(tmp_path / "a" / "ai2d_test_ids.csv"))
    assert [r.id for r in test] == ["ai2d-12.png-0"] and test.name == "ai2d-test"
    iconqa = vista_rl.make_dataset("iconqa", root=str(testing.write_iconqa(tmp_path / "i")))
    choose_img = iconqa[2]
    assert len(choose_img.images) == 3 and choose_img.choices == ["image 2", "image 3"] and choose_img.answer == "A"
    assert vista_rl.make_dataset("iconqa", root=str(tmp_path / "i"), ques_types=["fill_in_blank"])[0].answer == "9"
    with pytest.raises(ValueError, match="unknown IconQA question types"):
        vista_rl.make_dataset("iconqa", root=str(tmp_path / "i"), ques_types=["essay"])
    mathvista = vista_rl.make_dataset("mathvista", root=str(testing.write_mathvista(tmp_path / "mv")))
    assert mathvista[0].question.startswith("Hint:") and mathvista[0].metadata["precision"] == 1.0
    assert mathvista[1].answer == "B" and mathvista[1].question == "Is Medium Periwinkle the smoothest?"
    export = vista_rl.make_dataset("mathvista", root=str(testing.write_mathvista_parquet(tmp_path / "mvhf")))
    assert [(r.id, r.answer, r.task_type) for r in export] == [(r.id, r.answer, r.task_type) for r in mathvista]
    assert [Image.open(r.images[0]).size for r in export] == [(31, 20), (32, 20), (33, 20)]  # bytes became files


def test_geometry_pickles_refuse_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "test.pk"
    path.write_bytes(pickle.dumps([{"subject": "x", "choices": ["1"], "label": 0, "image": Evil()}]))
    with pytest.raises(pickle.UnpicklingError, match="refusing to load builtins.print"):
        read_problem_pickle(path)


def test_missing_release_files_are_clear_errors(tmp_path):
    for dataset_id in ("figureqa", "vizwiz", "docvqa", "clevr", "tabmwp", "ai2d", "iconqa", "mathvista", "geoqa"):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            vista_rl.make_dataset(dataset_id, root=str(tmp_path / "nowhere"))


def test_every_adapter_is_listed_with_its_layout_and_judge():
    registered = {spec.id: spec for spec in vista_rl.host().registry("datasets")}
    for adapter in ADAPTERS:
        spec = registered[adapter.id]
        assert spec.distribution == "vista-plugin-datasets"
        assert adapter.layout in spec.description and "judge:" in spec.description
    assert set(CASES) <= set(registered)


def test_fixture_images_live_in_the_release_folders(tmp_path):
    root = testing.write_iconqa(tmp_path)
    assert (Path(root) / "iconqa" / "test" / "choose_img" / "11" / "choice_1.png").is_file()


@pytest.mark.parametrize("dataset_id", sorted(CASES))
def test_converted_records_read_back_unchanged(tmp_path, dataset_id):
    from vista_plugin_datasets.convert import convert, source_parameter

    config = CASES[dataset_id][0](tmp_path / "raw")
    src = config.pop(source_parameter(dataset_id))
    original = vista_rl.make_dataset(dataset_id, root=src, **config)
    result = convert(dataset_id, src, tmp_path / "out", config)
    loaded = vista_rl.make_dataset("records", path=str(result.path))
    assert result.written == len(original) == len(loaded) and not result.skipped
    for before, after in zip(original, loaded, strict=True):
        assert (after.id, after.answer, after.choices, after.task_type) == (
            before.id, before.answer, before.choices, before.task_type)
        assert judge_for(after) == judge_for(before)
        assert [Image.open(a).size for a in after.images] == [Image.open(b).size for b in before.images]
