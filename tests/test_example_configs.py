"""Every example run config dry-runs under every engine that ships with VISTA (local, verl): one
engine-neutral config, no engine rejecting another's keys.  The local engine accepts every example;
the verl engine accepts one or refuses it as a whole, naming each setting verl would train
differently (plugins/engines/verl/tests/test_verl_config.py pins which, per example, and runs the examples
with the named changes through verl's own loader where verl is installed, scripts/test.d/verl.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from vista_rl.cli.main import main
from vista_rl.config import RunConfig, load_config

pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def _dry_run(config: Path, engine: str, model_dir: Path, out: Path) -> int:
    try:
        main(["train", str(config), "--engine", engine, "--dry-run", "--set", f"model.path={model_dir}",
              "--set", f"output_dir={out}"])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 2


@pytest.mark.parametrize("engine", ["local", "verl"])
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.stem)
def test_example_dry_runs_under_every_engine(example: Path, engine: str, tiny_model_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = _dry_run(example, engine, tiny_model_dir, tmp_path / "run")
    captured = capsys.readouterr()
    assert "unknown key" not in captured.err
    if engine == "verl" and code == 2:  # refused whole: every line names a setting and what to change
        assert "the verl engine would train this config differently" in captured.err, captured.err
        assert not (tmp_path / "run").exists(), "a dry run writes nothing"
        return
    assert code == 0, captured.err
    assert f"the config is valid for engine {engine!r}" in captured.out
    assert not (tmp_path / "run").exists(), "a dry run writes nothing"
    run = load_config(RunConfig, example)
    if engine == "verl":
        # the neutral values reach verl's own keys
        algo, trainer = run.algorithm, run.trainer
        for key, value in [("actor_rollout_ref.actor.clip_ratio_high", algo.clip_ratio_high),
                           ("actor_rollout_ref.actor.optim.lr", f"{trainer.lr:g}"),
                           ("actor_rollout_ref.rollout.n", run.rollout.group_size),
                           ("data.train_batch_size", trainer.seeds_per_step),
                           ("trainer.total_training_steps", trainer.steps)]:
            assert f"{key}={value}" in captured.out
        assert f"algorithm.adv_estimator=vista_{algo.estimator}" in captured.out
    else:
        assert f"RL {run.trainer.steps} steps of {run.trainer.seeds_per_step} seeds" in captured.out


def test_examples_keep_engine_sections_engine_specific() -> None:
    """The shared settings live in the neutral sections; engine_config holds one section per engine."""
    for example in EXAMPLES:
        data = yaml.safe_load(example.read_text())
        assert {"algorithm", "trainer", "eval"} <= set(data), example.name
        assert set(data.get("engine_config") or {}) <= {"local", "verl"}, example.name
