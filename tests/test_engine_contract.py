"""The engine contract: ``make_engine`` builds engines from the run config plus resume, refuses
factories and objects that do not follow ``vista_rl.Engine`` with an error naming the engine, and
``run_engine`` keeps ``status.json`` true to how a run ended."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import vista_rl
from vista_rl.config import RunConfig
from vista_rl.engine_contract import STATUS_FILE, read_status, run_engine
from vista_rl.errors import ConfigError, PluginLoadError


class StepEngine:
    """A test engine: writes one file into the run directory, then does what ``behaviour`` says."""

    behaviour = "finish"

    def __init__(self, run: RunConfig, resume: Path | None = None) -> None:
        self.config, self.resume = run, resume

    def validate(self) -> vista_rl.EnginePlan:
        if self.config.trainer.steps > 50:
            raise ConfigError("trainer.steps: this test engine takes at most 50")
        return vista_rl.EnginePlan(engine="test-steps", details="steps", warnings=("a warning",))

    def run(self) -> dict[str, Any]:
        out = Path(self.config.output_dir)
        (out / "progress.txt").write_text("half")
        status = read_status(out)
        assert status is not None and status["status"] == "running"  # recorded before run() starts
        if self.behaviour == "crash":
            raise RuntimeError("disk on fire")
        if self.behaviour == "interrupt":
            raise KeyboardInterrupt
        return {"run_dir": str(out)}


class NoResume:
    def __init__(self, run: RunConfig) -> None:
        self.run_config = run


class NoValidate:
    def __init__(self, run: RunConfig, resume: Path | None = None) -> None:
        pass

    def run(self) -> dict[str, Any]:
        return {}


class Plugin:
    @vista_rl.hookimpl
    def register_engines(self, register: Any) -> None:
        register("test-steps", StepEngine)
        register("test-no-resume", NoResume)
        register("test-no-validate", NoValidate)


@pytest.fixture
def engines(vista_plugin: Callable[..., str]) -> None:
    vista_plugin(Plugin(), name="engine-contract-test")


def _run(tmp_path: Path, engine: str = "test-steps", **extra: Any) -> RunConfig:
    return RunConfig.model_validate({"engine": engine, "output_dir": str(tmp_path / "run"),
                                     "env": {"id": "oddshape/odd-colour-v0"}, **extra})


@pytest.mark.usefixtures("engines")
def test_make_engine_checks_the_contract(tmp_path: Path) -> None:
    engine = vista_rl.make_engine("test-steps", run=_run(tmp_path), resume=tmp_path)
    assert isinstance(engine, vista_rl.Engine) and isinstance(engine, StepEngine)
    assert engine.resume == tmp_path and engine.config.engine == "test-steps"
    with pytest.raises(PluginLoadError, match=r"'test-no-resume' cannot be built as factory\(run=\.\.\., resume=\.\.\.\)"):
        vista_rl.make_engine("test-no-resume", run=_run(tmp_path))
    with pytest.raises(PluginLoadError, match=r"'test-no-validate' does not follow the Engine contract.*no validate\(\)"):
        vista_rl.make_engine("test-no-validate", run=_run(tmp_path))
    with pytest.raises(ConfigError, match="engine: no engine 'nosuch' is registered"):
        vista_rl.make_engine("nosuch", run=_run(tmp_path))
    with pytest.raises(ConfigError, match="engine_config.test-stepz: no engine 'test-stepz' is registered"):
        vista_rl.make_engine("test-steps", run=_run(tmp_path, engine_config={"test-stepz": {}}))


@pytest.mark.usefixtures("engines")
def test_a_section_for_an_engine_installed_elsewhere_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One run config for every engine: on a verl cluster without the local engine,
    ``engine_config.local`` belongs to another machine, not to a typo."""
    from vista_rl import _engine_build

    monkeypatch.setitem(_engine_build.ENGINE_DISTRIBUTIONS, "elsewhere", "vista-plugin-elsewhere")
    engine = vista_rl.make_engine("test-steps", run=_run(tmp_path, engine_config={"elsewhere": {"device": "cuda"}}))
    assert isinstance(engine, StepEngine)
    with pytest.raises(ConfigError, match="engine_config.elsewher: no engine 'elsewher' is registered"):
        vista_rl.make_engine("test-steps", run=_run(tmp_path, engine_config={"elsewher": {}}))


@pytest.mark.usefixtures("engines")
@pytest.mark.parametrize(("behaviour", "status", "raises"), [
    ("finish", "completed", None), ("crash", "failed", RuntimeError), ("interrupt", "interrupted", KeyboardInterrupt),
])
def test_status_json_records_how_the_run_ended(tmp_path: Path, behaviour: str, status: str,
                                               raises: type[BaseException] | None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StepEngine, "behaviour", behaviour)
    run = _run(tmp_path)
    engine = vista_rl.make_engine(run.engine, run=run)
    if raises is None:
        assert run_engine(engine, run.output_dir) == {"run_dir": run.output_dir}
    else:
        with pytest.raises(raises):
            run_engine(engine, run.output_dir)
    record = json.loads((tmp_path / "run" / STATUS_FILE).read_text())
    assert record["status"] == status
    assert (tmp_path / "run" / "progress.txt").read_text() == "half", "a failed run keeps its files"
    if behaviour == "crash":
        assert record["error"] == "RuntimeError: disk on fire" and "disk on fire" in record["traceback"]
    if behaviour == "interrupt":
        assert record["resume"] == f"vista train --resume {tmp_path / 'run'}"


@pytest.mark.usefixtures("engines")
def test_a_config_that_does_not_validate_writes_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, trainer={"steps": 90})
    with pytest.raises(ConfigError, match="trainer.steps"):
        run_engine(vista_rl.make_engine(run.engine, run=run), run.output_dir)
    assert not (tmp_path / "run").exists()


# ------------------------------------------------- a stale "running" status (issue 22, item 15)
def test_a_killed_runs_status_reads_as_interrupted(tmp_path: Path) -> None:
    """Attack: after SIGKILL, status.json said "running" forever with a dead pid."""
    import signal
    import subprocess
    import sys

    code = ("import sys, time; from vista_rl.engine_contract import write_status; "
            "write_status(sys.argv[1], 'running'); print('ready', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        live = read_status(tmp_path)
        assert live is not None and live["status"] == "running" and live["pid"] == child.pid
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    status = read_status(tmp_path)
    assert status is not None and status["status"] == "interrupted" and status["stale"] is True
    assert str(child.pid) in status["reason"] and "--resume" in status["resume"]
    assert json.loads((tmp_path / STATUS_FILE).read_text())["status"] == "running"  # the file is left as it was


def test_a_reused_pid_does_not_keep_a_dead_run_running(tmp_path: Path) -> None:
    from vista_rl.engine_contract import write_status

    write_status(tmp_path, "running")
    record = json.loads((tmp_path / STATUS_FILE).read_text())
    assert read_status(tmp_path)["status"] == "running"  # this process is alive
    if "process_start" not in record:
        pytest.skip("no /proc here: only the pid can be checked")
    record["process_start"] -= 1  # same pid, another process: the pid was reused
    (tmp_path / STATUS_FILE).write_text(json.dumps(record))
    assert read_status(tmp_path)["status"] == "interrupted"
    (tmp_path / STATUS_FILE).write_text("[" * 100_000)
    assert read_status(tmp_path)["status"] == "unknown"  # unreadable, not a crash


@pytest.mark.usefixtures("engines")
def test_resume_refuses_a_run_that_is_still_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from vista_rl.cli.main import main
    from vista_rl.engine_contract import write_status

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(json.dumps(_run(tmp_path).model_dump(mode="json")))
    write_status(run_dir, "running")  # this very process: alive
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--resume", str(run_dir)])
    assert exit_info.value.code != 0 and "still being trained" in capsys.readouterr().err
