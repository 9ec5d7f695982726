"""The svg-icons-simple adapter on a small hand-written fixture in the release's two-column form
(``Filename``, ``Svg``), as JSONL and as parquet (the format the dataset ships in)."""

import json
from pathlib import Path

import pytest
from vista_plugin_svg.records import load_svg_icon_targets

import vista_rl
from vista_rl_sdk import check_env

FIXTURE = Path(__file__).parent / "fixtures" / "svg-icons-simple-test.jsonl"
ENV_ID = "svg/reconstruct-v0"


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    folder = tmp_path_factory.mktemp("svg-icons-simple") / "data"
    folder.mkdir()
    table = pa.table({"Filename": [r["Filename"] for r in rows], "Svg": [r["Svg"] for r in rows]})
    pq.write_table(table.slice(0, 3), folder / "test-00000-of-00001.parquet")
    pq.write_table(table.slice(3), folder / "train-00000-of-00001.parquet")
    return folder


def test_jsonl_rows_become_clean_targets():
    targets = load_svg_icon_targets(FIXTURE)
    assert [t.id for t in targets] == ["icon-circle-ring", "icon-plus", "icon-house", "icon-check"]  # no-svg row skipped
    ring = targets[0]
    assert ring.svg.startswith("<svg") and ring.svg.endswith("</svg>")
    assert "DOCTYPE" not in ring.svg and "<?xml" not in ring.svg and ring.source == "svg-icons-simple"


def test_parquet_release_layout_with_split_filter(parquet_dir):
    assert [t.id for t in load_svg_icon_targets(parquet_dir, split="test")] == [
        "icon-circle-ring", "icon-plus", "icon-house"]
    assert [t.id for t in load_svg_icon_targets(parquet_dir, split="train", limit=1)] == ["icon-check"]


def test_dataset_registry_gives_task_records():
    records = vista_rl.make_dataset("svg-icons-simple", path=str(FIXTURE), limit=2)
    assert [r.id for r in records] == ["icon-circle-ring", "icon-plus"]
    assert records[1].answer.startswith("<svg") and records[1].dataset == "svg-icons-simple"


def test_env_on_records_conforms_and_the_oracle_is_the_icon(parquet_dir):
    config = {"source": "records", "records_path": str(parquet_dir), "records_split": "test", "image_size": 48}
    check_env(ENV_ID, config)
    env = vista_rl.make_env(ENV_ID, **config)
    observation, info = env.reset(seed=4)  # 4 % 3 records -> the second one
    assert info["target_id"] == "icon-plus" and info["target_source"] == "svg-icons-simple"
    result = env.step(env.oracle_response())
    assert result.info["scores"]["ssim"] == pytest.approx(1.0) and result.reward == pytest.approx(1.5)


def test_missing_records_give_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="svg-icons-simple"):
        load_svg_icon_targets(tmp_path / "nowhere")
    bad = tmp_path / "rows.jsonl"
    bad.write_text('{"Filename": "x", "Code": "<svg/>"}\n')
    with pytest.raises(KeyError, match="'Svg'"):
        load_svg_icon_targets(bad)
