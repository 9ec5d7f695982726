"""Issue 39, item 1: an env declares its turn limit (``Env.turn_limit``), ``vista eval`` and a run config
that set no ``rollout.max_turns`` play it, and an episode a limit the env did not choose cuts short
is counted and reported (trajectory ``cut_off``, ``cut_off_episodes`` in the eval summary and in the
local engine's step and held-out metrics).

The regression: a plugin author's 30-step maze scored its own oracle 0.550 under ``vista eval``,
whose ``--max-turns`` silently defaulted to 5."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

import vista_rl
from tests.cli_testkit import run_vista
from vista_rl import Env, Observation, StepResult
from vista_rl.backends.scripted import ScriptedBackend
from vista_rl.config import RolloutSection, RunConfig
from vista_rl.errors import VistaError
from vista_rl.parsing import parse_response
from vista_rl.rollout import RolloutEngine, RolloutMetrics, episode_specs
from vista_rl.turn_limit import DEFAULT_MAX_TURNS, env_turn_limit, is_cut_off, with_env_turn_limit

MAZE = "turns/corridor-v0"


class CorridorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    length: int = Field(12, ge=1)
    max_steps: int = Field(30, ge=1)


class CorridorEnv(Env):
    """A maze in one dimension: ``Right`` moves one cell, ``Left`` one back; the goal is ``length``
    cells away, so the oracle needs ``length`` turns (more than the old default of 5).  The env ends
    every episode after ``max_steps`` moves itself and declares that as its turn limit."""

    action_names = ("Left", "Right")

    def __init__(self, **config: Any) -> None:
        self.config = CorridorConfig(**config)
        self.position = self.steps = 0

    def turn_limit(self) -> int:
        return self.config.max_steps

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.position = self.steps = 0
        return Observation(f"You are at 0; the goal is at {self.config.length}."), {}

    def step(self, action: str) -> StepResult:
        answer = parse_response(action).answer
        valid = answer in self.action_names
        if valid:
            self.steps += 1
            self.position = max(0, self.position + (1 if answer == "Right" else -1))
        success = self.position >= self.config.length
        truncated = not success and self.steps >= self.config.max_steps
        info = {"success": success, "format_ok": answer is not None, "action_valid": valid}
        return StepResult(Observation(f"You are at {self.position}."), float(success), success, truncated, info)

    def oracle_response(self) -> str | None:
        return "<answer>Right</answer>"


class QuestionConfig(BaseModel):
    max_turns: int = 7


class KeepsMaxTurnsInConfig(CorridorEnv):
    """An env that keeps its limit as ``config.max_turns`` (the VQA family's way): the default
    ``Env.turn_limit`` reads it."""

    def __init__(self) -> None:
        super().__init__()
        self.config = QuestionConfig()  # type: ignore[assignment]

    turn_limit = Env.turn_limit  # type: ignore[assignment]


class EndlessEnv(CorridorEnv):
    """Declares no limit and never ends by itself."""

    def turn_limit(self) -> None:  # type: ignore[override]
        return None


class BadLimitEnv(CorridorEnv):
    def turn_limit(self) -> Any:
        return "30"


class TurnsPlugin:
    @vista_rl.hookimpl
    def register_envs(self, register: Any) -> None:
        register(MAZE, CorridorEnv)
        register("turns/config-limit-v0", KeepsMaxTurnsInConfig)
        register("turns/endless-v0", EndlessEnv)
        register("turns/bad-limit-v0", BadLimitEnv)


@pytest.fixture(autouse=True)
def turn_envs(vista_plugin: Any) -> None:
    vista_plugin(TurnsPlugin(), name="turn-limit-test")



def test_eval_plays_the_envs_own_turn_limit_without_a_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The maze case from the issue: the oracle scores 1.000 with no flags (it scored 0 under the old
    default of 5 turns, as the corridor needs 12), and the saved config says which limit was played."""
    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "run"
    code, text = run_vista(capsys, "eval", "--env", MAZE, "--model", "scripted:oracle", "--episodes", "4", "--out", str(out))
    assert code == 0, text
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["success_rate"]["value"] == 1.0
    assert metrics["max_turns"] == 30 and metrics["env_turn_limit"] == 30
    assert metrics["cut_off_episodes"] == 0 and metrics["cut_off_rate"]["value"] == 0.0
    assert yaml.safe_load((out / "config.yaml").read_text())["rollout"]["max_turns"] == 30
    assert "were cut off" not in text


def test_a_limit_the_env_did_not_choose_is_counted_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    out = tmp_path / "short"
    code, text = run_vista(capsys, "eval", "--env", MAZE, "--model", "scripted:oracle", "--episodes", "3",
                       "--max-turns", "5", "--out", str(out))
    assert code == 0, text
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["success_rate"]["value"] == 0.0
    assert metrics["cut_off_episodes"] == 3 and metrics["cut_off_by"] == {"max_turns": 3}
    assert metrics["cut_off_rate"]["value"] == 1.0
    assert "3 of 3 episode(s) were cut off by rollout.max_turns=5" in text and "its own limit is 30" in text
    assert "cut off rate" in text  # a row of the metrics table too
    records = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert {(r["metadata"]["cut_off"], r["metadata"]["turn_limit"], r["metadata"]["env_turn_limit"])
            for r in records} == {(True, 5, 30)}


def test_an_env_without_a_limit_keeps_the_default_and_its_cut_offs_count(tmp_path: Path) -> None:
    result = vista_rl.evaluate(env="turns/endless-v0", model="scripted:oracle", html=False,
                               overrides=["rollout.episodes=2", f"output_dir={json.dumps(str(tmp_path / 'e'))}"])
    assert result.config.rollout.max_turns == DEFAULT_MAX_TURNS
    assert result.summary["env_turn_limit"] is None
    assert result.cut_off_episodes == 2 and result.success_rate == 0.0


def test_a_config_that_sets_max_turns_keeps_it(tmp_path: Path) -> None:
    """Run configs that set rollout.max_turns (every example does) play exactly that, also above the
    env's limit, and a cap at or above the env's own limit is not a cut-off."""
    base = {"env": {"id": MAZE}, "model": {"backend": "scripted", "path": "oracle"}}
    for turns in (4, 40):
        config = {**base, "rollout": {"max_turns": turns, "episodes": 1}, "output_dir": str(tmp_path / str(turns))}
        result = vista_rl.evaluate(config, html=False)
        assert result.config.rollout.max_turns == turns
        assert result.cut_off_episodes == (1 if turns < 12 else 0)
    run = RunConfig.model_validate({**base, "rollout": {"max_turns": 2}})
    assert with_env_turn_limit(run) is run
    unset = with_env_turn_limit(RunConfig.model_validate(base))
    assert unset.rollout.max_turns == 30 and "max_turns" in unset.rollout.model_fields_set
    assert not is_cut_off("max_turns", 30, 30) and not is_cut_off("max_turns", 40, 30)
    assert is_cut_off("max_turns", 29, 30) and is_cut_off("max_turns", 5, None) and is_cut_off("token_budget", 99, 5)
    assert not is_cut_off("done", 5, None) and not is_cut_off("env_error", 5, None)


def test_where_envs_declare_their_limit() -> None:
    assert env_turn_limit(vista_rl.make_env("turns/config-limit-v0")) == 7  # Env.turn_limit reads config.max_turns
    assert env_turn_limit(vista_rl.make_env("oddshape/odd-colour-v0")) is None
    frozen = vista_rl.make_env("frozenlake/frozenlake-v0", max_steps=17)
    assert env_turn_limit(frozen) == 17  # the grid games: max_steps
    blank = vista_rl.make_env("vista/blank-images", env="frozenlake/frozenlake-v0", config={"max_steps": 9})
    assert env_turn_limit(blank) == 9  # wrappers answer for the env they wrap
    assert env_turn_limit(vista_rl.make_env("svg/reconstruct-v0", max_turns=3)) == 3
    with pytest.raises(VistaError, match=r"BadLimitEnv.turn_limit\(\) returned '30'"):
        env_turn_limit(vista_rl.make_env("turns/bad-limit-v0"))


def test_a_bad_turn_limit_fails_its_episodes_with_the_reason() -> None:
    with RolloutEngine(ScriptedBackend("oracle"), RolloutSection(max_turns=3)) as engine:
        (trajectory,) = engine.run(episode_specs("turns/bad-limit-v0", [0]))
    assert trajectory.failure is not None and "turn_limit() returned '30'" in trajectory.failure


def test_metrics_count_cut_offs_by_reason() -> None:
    metrics = RolloutMetrics()
    with RolloutEngine(ScriptedBackend("oracle"), RolloutSection(max_turns=2)) as engine:
        for trajectory in engine.run(episode_specs(MAZE, range(3))):
            metrics.add(trajectory)
    summary = metrics.summary()
    assert summary["cut_off_episodes"] == 3 and summary["cut_off_by"] == {"max_turns": 3}


def test_train_config_without_max_turns_plays_the_envs_limit(tmp_path: Path) -> None:
    """``vista train`` / ``vista_rl.train`` resolve the limit before the engine is built, so every
    engine (and the saved config.yaml) sees it; ``--dry-run`` prints it."""
    from vista_rl.api import prepare_training

    config = {"env": {"id": MAZE, "config": {"max_steps": 21}}, "output_dir": str(tmp_path / "run"),
              "engine_config": {"local": {"device": "cpu"}}}
    plan = prepare_training(config)
    assert plan.run.rollout.max_turns == 21
    assert prepare_training(config, overrides=["rollout.max_turns=6"]).run.rollout.max_turns == 6


def test_local_engine_step_and_eval_metrics_count_cut_offs() -> None:
    pytest.importorskip("torch")
    from vista_plugin_local.evaluate import evaluate
    from vista_plugin_local.rl_step import rollout_metrics

    from vista_rl import SamplingParams

    with RolloutEngine(ScriptedBackend("oracle"), RolloutSection(max_turns=4)) as engine:
        trajectories = engine.run(episode_specs(MAZE, range(2)))
        assert rollout_metrics(trajectories, [])["cut_off_episodes"] == 2
        result = evaluate(engine, episode_specs(MAZE, range(3)), SamplingParams(), "held-out")
    assert result.cut_off == 3 and result.to_dict()["cut_off_episodes"] == 3
