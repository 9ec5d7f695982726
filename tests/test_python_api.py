"""Issue 39, item 7: training and evaluation from Python, ``vista_rl.train`` and ``vista_rl.evaluate``,
the same runs as ``vista train`` and ``vista eval`` (which call them) with typed results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import vista_rl
from vista_rl.config import RunConfig
from vista_rl.engine_contract import write_status
from vista_rl.errors import ConfigError, VistaError
from vista_rl.eval_run import RunSetupError

ODD = "oddshape/odd-colour-v0"


def _eval_config(out: Path, **rollout: Any) -> dict[str, Any]:
    return {"env": {"id": ODD, "config": {"grid": 2}}, "model": {"backend": "scripted", "path": "oracle"},
            "rollout": {"episodes": 3, **rollout}, "output_dir": str(out)}


def test_evaluate_returns_the_summary_and_the_run_directory(tmp_path: Path) -> None:
    result = vista_rl.evaluate(env=ODD, model="scripted:oracle", overrides=[
        "rollout.episodes=4", "rollout.group_size=2", f"output_dir={json.dumps(str(tmp_path / 'run'))}"])
    assert isinstance(result, vista_rl.EvalResult)
    assert result.run_dir == tmp_path / "run" and result.episodes == 8
    assert result.success_rate == 1.0 and result.success_ci95[1] == 1.0 and result.success_ci95[0] > 0.6
    assert result.summary == json.loads((result.run_dir / "metrics.json").read_text())
    assert (result.run_dir / "trajectories.html").is_file()
    assert result.config.model.backend == "scripted" and result.config.model.path == "oracle"


@pytest.mark.parametrize("form", ["RunConfig", "dict", "yaml"])
def test_evaluate_takes_every_config_form(tmp_path: Path, form: str) -> None:
    data = _eval_config(tmp_path / "run")
    config: Any = data
    if form == "RunConfig":
        config = RunConfig.model_validate(data)
    elif form == "yaml":
        config = tmp_path / "eval.yaml"
        config.write_text(yaml.safe_dump(data))
    result = vista_rl.evaluate(config, overrides=["rollout.episodes=2"], html=False)
    assert result.episodes == 2 and result.success_rate == 1.0
    assert not (result.run_dir / "trajectories.html").exists()


def test_evaluate_with_a_backend_object_and_clear_errors(tmp_path: Path) -> None:
    from vista_rl.backends.scripted import ScriptedBackend

    backend = ScriptedBackend(responses=["<answer>nonsense</answer>"])
    result = vista_rl.evaluate(_eval_config(tmp_path / "obj"), backend=backend, html=False)
    assert result.success_rate == 0.0 and result.episodes == 3
    with pytest.raises(RunSetupError, match="already holds trajectories"):
        vista_rl.evaluate(_eval_config(tmp_path / "obj"), html=False)
    assert vista_rl.evaluate(_eval_config(tmp_path / "obj"), html=False, overwrite=True).success_rate == 1.0
    with pytest.raises(ConfigError, match="rollout.episodes"):
        vista_rl.evaluate(_eval_config(tmp_path / "bad"), overrides=["rollout.episodes=0"])
    with pytest.raises(VistaError, match="No env with id"):
        vista_rl.evaluate(env="oddshape/no-such-env", model="scripted:oracle",
                          overrides=[f"output_dir={json.dumps(str(tmp_path / 'x'))}"])


class RecordingEngine:
    """A training engine that trains nothing: writes a step log and a model directory, and says
    where the model is, like an engine that saves it elsewhere would."""

    def __init__(self, run: RunConfig, resume: Path | None = None) -> None:
        self.run_config, self.resume = run, resume

    def validate(self) -> vista_rl.EnginePlan:
        return vista_rl.EnginePlan(engine="test-recording")

    def run(self) -> dict[str, Any]:
        out = Path(self.run_config.output_dir)
        (out / "metrics.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n{"torn')
        (out / "elsewhere").mkdir(exist_ok=True)
        return {"run_dir": str(out), "evals": {"rl": {"success": {"value": 0.5}}},
                "model_path": str(out / "elsewhere"), "max_turns": self.run_config.rollout.max_turns}


class EnginePlugin:
    @vista_rl.hookimpl
    def register_engines(self, register: Any) -> None:
        register("test-recording", RecordingEngine)


def test_train_with_any_engine_returns_run_dir_metrics_and_model(tmp_path: Path, vista_plugin: Any) -> None:
    vista_plugin(EnginePlugin(), name="python-api-test")
    config = {"env": {"id": ODD}, "output_dir": str(tmp_path / "run")}
    result = vista_rl.train(config, engine="test-recording", overrides=["rollout.max_turns=2"])
    assert isinstance(result, vista_rl.RunResult)
    assert result.run_dir == tmp_path / "run" and result.config.engine == "test-recording"
    assert result.metrics == {"step": 2, "loss": 1.5}  # the last whole line of the step log
    assert result.model_path == tmp_path / "run" / "elsewhere"
    assert result.evals == {"rl": {"success": {"value": 0.5}}} and result.summary["max_turns"] == 2
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "completed"
    # resuming a run that a live process trains is refused, as vista train --resume refuses it
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(result.config.model_dump(mode="json")))
    write_status(tmp_path / "run", "running")
    with pytest.raises(VistaError, match="still being trained"):
        vista_rl.train(resume=tmp_path / "run")
    with pytest.raises(ConfigError, match="give a run config"):
        vista_rl.train()


def test_train_a_tiny_model_from_python(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The README's example on the tiny model: SFT and one GRPO step, then the typed result."""
    pytest.importorskip("transformers")
    result = vista_rl.train({
        "seed": 1, "output_dir": str(tmp_path / "run"),
        "env": {"id": ODD, "config": {"grid": 2, "cell_size": 28, "prompt_format": "no_think"}},
        "model": {"path": str(tiny_model_dir)},
        "rollout": {"max_turns": 1, "group_size": 2, "sampling": {"max_tokens": 4}},
        "trainer": {"steps": 1, "seeds_per_step": 2, "train_seeds": {"start": 0, "count": 20}},
        "sft": {"steps": 1, "batch_size": 2, "seeds": {"start": 100, "count": 2}},
        "eval": {"seeds": {"start": 1000, "count": 2}},
    }, overrides=["trainer.loggers=[jsonl]"])
    assert set(result.evals) == {"untrained", "sft", "rl"}
    assert result.model_path == tmp_path / "run" / "models" / "final"
    assert (result.model_path / "config.json").is_file()
    assert result.metrics.get("stage") == "rl" and "success_rate" in result.metrics
    assert "cut_off_episodes" in result.metrics and result.evals["rl"]["cut_off_episodes"] == 0


@pytest.mark.parametrize("entry", ["train", "evaluate"])
def test_strict_refuses_code_a_config_names_before_any_env_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    entry: str) -> None:
    """Both entry points make an env before the engine (for the env's turn limit; for the eval), so
    the import-target check (vista_rl.import_targets) must come first: with ``strict`` the module the
    svg env's ``encoder`` names is never imported."""
    from vista_rl.import_targets import ImportTargetRefused

    module = "not_a_vista_plugin_api_test"
    mark = tmp_path / "imported.mark"
    (tmp_path / f"{module}.py").write_text(f"from pathlib import Path\nPath({str(mark)!r}).write_text('x')\n"
                                           "def make_encoder():\n    raise SystemExit('called')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {"env": {"id": "svg/reconstruct-v0", "config": {"embedding_weight": 1.0,
                                                             "encoder": f"{module}:make_encoder"}},
              "model": {"backend": "scripted", "path": "oracle"}, "output_dir": str(tmp_path / "run")}
    with pytest.raises(ImportTargetRefused, match="env.config.encoder"):
        if entry == "train":
            vista_rl.train(config, strict=True)
        else:
            vista_rl.evaluate(config, strict=True)
    assert not mark.exists() and not (tmp_path / "run").exists()
