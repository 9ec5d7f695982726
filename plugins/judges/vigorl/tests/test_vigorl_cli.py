"""``vista mcts search`` -> ``vista mcts build`` -> ``vista train`` (SFT stage on the built records),
through the real CLI entry point, with the scripted noisy teacher and the tiny real Qwen2.5-VL."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from tests_helpers_vigorl import rows, run, write_tasks
from vista_plugin_vigorl.mcts.runner import read_rows
from vista_plugin_vigorl.rewards import GroundedSingleTurnJudge

SEARCH = ["--model", "vigorl/noisy-teacher", "-M", "noise=0.05", "--judge", "exact",
          "--set", "n_simulations=3", "--set", "max_depth=4", "--workers", "3", "--seed", "5"]


def test_search_resumes_after_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = write_tasks(tmp_path, 6)
    trees = tmp_path / "trees.jsonl"
    assert run(["mcts", "search", str(tasks), "--out", str(trees), "--limit", "3", *SEARCH]) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (first["searched"], first["bad_lines"]) == (3, 1)
    done = {row["id"] for row in rows(trees)}
    # What a crash leaves: a failed search's row and half a row torn mid-write.
    with trees.open("a") as handle:
        handle.write(json.dumps({"id": "grid-3", "error": "RuntimeError: teacher went away"}) + "\n")
        handle.write('{"id": "grid-4", "question": "What col')
    assert run(["mcts", "search", str(tasks), "--out", str(trees), *SEARCH]) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (second["skipped_done"], second["searched"], second["failed"]) == (3, 3, 0)
    final = rows(trees)  # every line parses again: the torn one was cut
    finished = [row for row in final if not row.get("error")]
    assert sorted(row["id"] for row in finished) == [f"grid-{i}" for i in range(6)]
    assert done <= {row["id"] for row in finished}
    for row in finished:
        assert row["tree"]["visit_count"] > 0 and row["settings"]["n_simulations"] == 3
        assert row["image"][0].endswith(".png") and Path(row["image"][0]).is_file()
    # a third run has nothing left to do
    assert run(["mcts", "search", str(tasks), "--out", str(trees), *SEARCH]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["searched"] == 0


def test_bad_command_lines_say_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = write_tasks(tmp_path, 1)
    out = str(tmp_path / "t.jsonl")
    assert run(["mcts", "search", str(tasks), "--out", out, "--model", "no-such-model"]) == 2
    assert "no-such-model" in capsys.readouterr().err
    assert run(["mcts", "search", str(tasks), "--out", out, "--model", "vigorl/noisy-teacher",
                "--set", "c_puct=-1"]) == 2
    assert "c_puct" in capsys.readouterr().err


def test_search_build_train_end_to_end(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # rich would wrap the lines checked below
    tasks = write_tasks(tmp_path, 4)
    trees, records = tmp_path / "trees.jsonl", tmp_path / "sft.jsonl"
    assert run(["mcts", "search", str(tasks), "--out", str(trees), *SEARCH]) == 0
    capsys.readouterr()
    assert run(["mcts", "build", str(trees), "--out", str(records), "--max-chains", "3"]) == 0
    built = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert built["samples"] == 4 and 4 <= built["chains"] <= 12
    sft_rows = rows(records)
    per_sample: dict[str, int] = {}
    judge = GroundedSingleTurnJudge()
    for record in sft_rows:
        per_sample[record["metadata"]["sample_id"]] = per_sample.get(record["metadata"]["sample_id"], 0) + 1
        response = record["turns"][0]["response"]
        assert judge.score(response, record["metadata"]["true_answer"]).details["format"] == 1.0
        assert judge.score(response, record["metadata"]["true_answer"]).details["acc"] == 1.0  # chains end right
    assert max(per_sample.values()) <= 3
    config = {
        "seed": 1, "output_dir": str(tmp_path / "run"),
        "env": {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 28, "prompt_format": "no_think"}},
        "model": {"path": str(tiny_model_dir)},
        "engine_config": {"local": {"image_size": 56}},
        "rollout": {"max_turns": 1, "group_size": 2, "sampling": {"max_tokens": 4}},
        "trainer": {"steps": 0},
        "sft": {"steps": 2, "batch_size": 2, "source": "jsonl", "path": str(records), "lr": 1e-3},
        "eval": {"seeds": {"start": 1000, "count": 1}, "at_start": False, "after_sft": False},
    }
    config_path = tmp_path / "train.yaml"
    config_path.write_text(yaml.safe_dump(config))
    assert run(["train", str(config_path)]) == 0
    out = capsys.readouterr().out
    assert f"{len(sft_rows)} trajectories" in out  # every built record was read, none skipped
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    sft = [m for m in metrics if m.get("stage") == "sft"]
    assert len(sft) == 2 and all(m["loss"] > 0 for m in sft)


def test_a_killed_search_resumes_where_it_stopped(tmp_path: Path) -> None:
    """SIGKILL the real command mid-run (a slow teacher keeps searches in flight), then rerun it:
    finished trees are kept, not searched again, and every task ends with exactly one tree."""
    tasks = write_tasks(tmp_path, 8)
    trees = tmp_path / "trees.jsonl"
    command = [sys.executable, "-c", "from vista_rl.cli import main; main()", "mcts", "search", str(tasks),
               "--out", str(trees), *SEARCH[:-4], "--workers", "1", "--seed", "5", "-M", "delay_s=0.05"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if trees.is_file() and trees.read_text().count("\n") >= 2:
                break
            time.sleep(0.05)
        assert process.poll() is None, "the search finished before it could be killed; slow the teacher down"
        process.kill()
    finally:
        process.wait(timeout=30)
    before = [row["id"] for row in read_rows(trees) if not row.get("error")]  # a torn last line is skipped
    assert 2 <= len(before) < 8
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    summary = json.loads(completed.stdout.strip().splitlines()[-1])
    assert summary["skipped_done"] == len(before) and summary["searched"] == 8 - len(before)
    ids = [row["id"] for row in rows(trees) if not row.get("error")]  # every line parses: the torn one was cut
    assert sorted(ids) == sorted(f"grid-{i}" for i in range(8)) and ids[: len(before)] == before


def test_worker_count_does_not_change_the_trees(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path, 4)
    trees = {}
    for workers in ("1", "3"):
        out = tmp_path / f"trees-{workers}.jsonl"
        assert run(["mcts", "search", str(tasks), "--out", str(out), *SEARCH[:-4], "--workers", workers,
                    "--seed", "5"]) == 0
        trees[workers] = {row["id"]: row["tree"] for row in rows(out)}
    assert trees["1"] == trees["3"]


def test_the_tiny_real_model_can_be_the_teacher(tmp_path: Path, tiny_model_dir: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The transformers backend (a random tiny Qwen2.5-VL) as the teacher: its replies are noise,
    so they are read as malformed steps and the trees are dead ends, but the search runs through."""
    tasks = write_tasks(tmp_path, 1)
    trees = tmp_path / "trees.jsonl"
    assert run(["mcts", "search", str(tasks), "--out", str(trees), "--model", "transformers",
                "-M", f"path={tiny_model_dir}", "--set", "n_simulations=2", "--set", "max_new_tokens=6",
                "--set", "num_children_per_expand=2"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["searched"] == 1 and summary["failed"] == 0
    (row,) = rows(trees)
    assert row["stats"]["teacher_calls"] >= 1 and row["stats"]["replies"] >= 2
