"""``vista train`` end to end through the real CLI entry point: a tiny run, its outputs, and the
messages for bad configs and bad resume directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vista_rl.cli.main import main

pytest.importorskip("transformers")


def _write_config(tmp_path: Path, model_dir: Path) -> Path:
    config = {
        "seed": 1,
        "output_dir": str(tmp_path / "run"),
        "env": {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 28, "prompt_format": "no_think"}},
        "model": {"path": str(model_dir)},
        "rollout": {"max_turns": 1, "group_size": 2, "sampling": {"max_tokens": 4}},
        "engine_config": {
            "trainer": {"steps": 1, "seeds_per_step": 2, "train_seeds": {"start": 0, "count": 20}},
            "sft": {"steps": 1, "batch_size": 2, "seeds": {"start": 100, "count": 2}},
            "eval": {"seeds": {"start": 1000, "count": 2}},
        },
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _run(argv: list[str]) -> int:
    try:
        main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_train_command_writes_a_complete_run_dir(tmp_path: Path, tiny_model_dir: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_config(tmp_path, tiny_model_dir)
    assert _run(["train", str(config), "--set", "engine_config.algorithm.loss_agg=seq-mean"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "run"
    assert f"run directory: {run}" in out
    results = json.loads((run / "results.json").read_text())
    assert set(results["evals"]) == {"untrained", "sft", "rl"}
    for record in results["evals"].values():
        assert 0.0 <= record["success"]["ci95_low"] <= record["success"]["value"] <= record["success"]["ci95_high"]
    assert (run / "reward_success.png").stat().st_size > 1000
    assert any((run / "tensorboard").iterdir())
    assert yaml.safe_load((run / "config.yaml").read_text())["engine_config"]["algorithm"]["loss_agg"] == "seq-mean"
    # A second start into the same directory refuses and says how to continue instead.
    assert _run(["train", str(config)]) == 2
    assert f"vista train --resume {run}" in capsys.readouterr().err
    # Resuming a finished run does no more training and keeps the results.
    assert _run(["train", "--resume", str(run)]) == 0
    assert json.loads((run / "results.json").read_text())["evals"].keys() == results["evals"].keys()


def test_bad_config_and_bad_resume_give_clear_errors(tmp_path: Path, tiny_model_dir: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_config(tmp_path, tiny_model_dir)
    assert _run(["train", str(config), "--set", "engine_config.trainer.stepz=3"]) == 2
    assert "engine_config.trainer.stepz: unknown key" in capsys.readouterr().err
    assert _run(["train", str(config), "--set", "rollout.group_size=0"]) == 2
    assert "rollout.group_size" in capsys.readouterr().err
    assert _run(["train", str(config), "--set", "env.id=nosuch/env-v0"]) == 2
    assert "env.id" in capsys.readouterr().err
    assert _run(["train", "--resume", str(tmp_path / "missing")]) == 2
    assert "no config.yaml" in capsys.readouterr().err
    assert _run(["train"]) == 2


def test_dry_run_validates_and_trains_nothing(tmp_path: Path, tiny_model_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_config(tmp_path, tiny_model_dir)
    assert _run(["train", str(config), "--dry-run", "--set", "rollout.max_turns=2"]) == 0
    out = capsys.readouterr().out
    assert "nothing was trained" in out and "max_turns: 2" in out
    assert not (tmp_path / "run").exists()
    assert _run(["train", str(config), "--engine", "nosuch", "--dry-run"]) == 2
    assert "engine" in capsys.readouterr().err
