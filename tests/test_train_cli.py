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
        "trainer": {"steps": 1, "seeds_per_step": 2, "train_seeds": {"start": 0, "count": 20}},
        "sft": {"steps": 1, "batch_size": 2, "seeds": {"start": 100, "count": 2}},
        "eval": {"seeds": {"start": 1000, "count": 2}},
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
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # rich wraps long lines (the run directory's path) at the width
    config = _write_config(tmp_path, tiny_model_dir)
    assert _run(["train", str(config), "--set", "algorithm.loss_agg=seq-mean"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "run"
    assert f"run directory: {run}" in out
    results = json.loads((run / "results.json").read_text())
    assert set(results["evals"]) == {"untrained", "sft", "rl"}
    for record in results["evals"].values():
        assert 0.0 <= record["success"]["ci95_low"] <= record["success"]["value"] <= record["success"]["ci95_high"]
    assert (run / "reward_success.png").stat().st_size > 1000
    assert any((run / "tensorboard").iterdir())
    assert yaml.safe_load((run / "config.yaml").read_text())["algorithm"]["loss_agg"] == "seq-mean"
    assert json.loads((run / "status.json").read_text())["status"] == "completed"
    # A second start into the same directory refuses and says how to continue instead; the finished
    # run's record is left as it was.
    assert _run(["train", str(config)]) == 2
    assert f"vista train --resume {run}" in capsys.readouterr().err
    assert json.loads((run / "status.json").read_text())["status"] == "completed"
    # Resuming a finished run does no more training and keeps the results.
    assert _run(["train", "--resume", str(run)]) == 0
    assert json.loads((run / "results.json").read_text())["evals"].keys() == results["evals"].keys()


@pytest.mark.parametrize("dry_run", [False, True])
def test_bad_config_and_bad_resume_give_clear_errors(tmp_path: Path, tiny_model_dir: Path, dry_run: bool,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_config(tmp_path, tiny_model_dir)
    flags = ["--dry-run"] if dry_run else []

    def error(*overrides: str) -> str:
        argv = ["train", str(config), *flags]
        for override in overrides:
            argv += ["--set", override]
        assert _run(argv) == 2
        return capsys.readouterr().err

    assert "trainer.stepz: unknown key" in error("trainer.stepz=3")
    # the engine's own section is validated too, --dry-run included, and errors name the full key
    assert "engine_config.local.stepz: unknown key" in error("engine_config.local.stepz=3")
    assert "engine_config.local.precision" in error("engine_config.local.precision=fp64")
    # a section for an engine that does not exist (e.g. the old flat layout) names the key
    old_layout = error("engine_config.trainer.steps=3")
    assert "engine_config.trainer: no engine 'trainer' is registered" in old_layout
    assert "move it to the top level" in old_layout
    assert "rollout.group_size" in error("rollout.group_size=0")
    assert "env.id" in error("env.id=nosuch/env-v0")
    assert "algorithm.estimator" in error("algorithm.estimator=nosuch")
    assert "algorithm.estimator_params.gama: grpo takes no parameter 'gama'" in error("algorithm.estimator_params.gama=1")
    assert "model.path" in error(f"model.path={tmp_path}")
    assert not (tmp_path / "run").exists(), "a config that does not validate must not leave a run directory"
    assert _run(["train", "--resume", str(tmp_path / "missing")]) == 2
    assert "no config.yaml" in capsys.readouterr().err
    assert _run(["train"]) == 2


def test_a_failed_run_is_marked_failed_and_can_be_started_again(tmp_path: Path, tiny_model_dir: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A model directory that passes the cheap checks but does not load fails inside the run, after the
    run directory exists: status.json says failed, with the error; the next start is not refused."""
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    config = _write_config(tmp_path, broken)
    with pytest.raises(ValueError, match="processing class"):  # transformers' own error, not a VistaError
        main(["train", str(config)])
    run = tmp_path / "run"
    assert f"{run / 'status.json'} records the error" in capsys.readouterr().err
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "failed"
    assert "processing class" in status["error"] and "Traceback" in status["traceback"]
    assert (run / "config.yaml").is_file(), "a failed run keeps its files for inspection"
    # no checkpoint was written, so the same output_dir can be used again (and gets a fresh record)
    assert _run(["train", str(config), "--set", f"model.path={tiny_model_dir}", "--set", "trainer.steps=0",
                 "--set", "sft.steps=0", "--set", "eval.at_start=false"]) == 0
    assert json.loads((run / "status.json").read_text())["status"] == "completed"


def test_dry_run_validates_and_trains_nothing(tmp_path: Path, tiny_model_dir: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    config = _write_config(tmp_path, tiny_model_dir)
    assert _run(["train", str(config), "--dry-run", "--set", "rollout.max_turns=2"]) == 0
    out = capsys.readouterr().out
    assert "nothing was trained" in out and "max_turns: 2" in out
    assert not (tmp_path / "run").exists()
    assert _run(["train", str(config), "--engine", "nosuch", "--dry-run"]) == 2
    assert "engine: no engine 'nosuch' is registered" in capsys.readouterr().err
