"""The fan-out every engine uses (``vista_rl.RunLoggers``): a logger that fails while being made, in
``start`` or in ``finish`` is warned about once and recorded with the phase; the others get every
record; a misspelt id is a config error naming the key before anything runs."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import vista_rl
from vista_rl import ConfigError, LoggerWarning, MetricsLogger, RunStatus


class Recorder(MetricsLogger):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        self.calls.append(("start", config))

    def log(self, metrics: dict[str, Any], step: int) -> None:
        self.calls.append(("log", step))

    def finish(self, status: RunStatus) -> None:
        self.calls.append(("finish", status))


class BadStart(Recorder):
    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        raise PermissionError("no write access")


class BadFinish(Recorder):
    def finish(self, status: RunStatus) -> None:
        raise TimeoutError("flush timed out")


def bad_make(**options: Any) -> MetricsLogger:
    raise ImportError("tracker package missing")


RECORDER = Recorder()


@pytest.fixture
def loggers_plugin(vista_plugin: Callable[..., str]) -> None:
    @vista_rl.hookimpl
    def register_loggers(register: vista_rl.RegisterLogger) -> None:
        register("t/ok", lambda: RECORDER)
        register("t/bad-start", BadStart)
        register("t/bad-finish", BadFinish)
        register("t/bad-make", bad_make)

    vista_plugin(SimpleNamespace(register_loggers=register_loggers), name="fanout")


@pytest.mark.usefixtures("loggers_plugin")
def test_failures_in_every_phase_warn_once_and_spare_the_others(tmp_path: Path) -> None:
    RECORDER.calls.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loggers = vista_rl.RunLoggers(["t/ok", "t/bad-start", "t/bad-finish", "t/bad-make"])
        loggers.start(tmp_path, {"seed": 1})
        for step in (1, 2, 3):
            loggers.log({"stage": "rl", "x": step}, step)
        loggers.finish("interrupted")
    messages = sorted(str(w.message) for w in caught if issubclass(w.category, LoggerWarning))
    assert len(messages) == 3 and [m.split("'")[1] for m in messages] == ["t/bad-finish", "t/bad-make", "t/bad-start"]
    assert RECORDER.calls == [("start", {"seed": 1}), ("log", 1), ("log", 2), ("log", 3), ("finish", "interrupted")]
    report = json.loads((tmp_path / "loggers.json").read_text())
    assert report == loggers.report()
    assert {name: (state["status"], state.get("phase")) for name, state in report.items()} == {
        "t/ok": ("ok", None), "t/bad-start": ("failed", "start"), "t/bad-finish": ("failed", "finish"),
        "t/bad-make": ("failed", "make")}
    assert report["t/bad-make"]["error"] == "ImportError: tracker package missing"


def test_an_unknown_logger_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"trainer\.loggers: .*wandbb"):
        vista_rl.check_loggers(["jsonl", "wandbb"])
    with pytest.raises(ConfigError, match=r"trainer\.loggers"):
        vista_rl.RunLoggers([{"id": "wandbb"}])


def test_scalar_metrics_names_numbers_alike_for_every_logger() -> None:
    record = {"stage": "eval", "step": 4, "global_step": 9, "label": "rl", "ok": True, "nan": float("nan"),
              "success": {"value": 0.5, "ci95": {"low": 0.1}}, "episodes": 8}
    assert vista_rl.scalar_metrics(record) == {"eval/ok": 1.0, "eval/success/value": 0.5,
                                               "eval/success/ci95/low": 0.1, "eval/episodes": 8.0}
    assert vista_rl.flat_config({"trainer": {"lr": 0.1, "loggers": ["jsonl"]}, "engine_config": {}, "x": "a"}) == {
        "trainer.lr": "0.1", "trainer.loggers": '["jsonl"]', "engine_config": "{}", "x": "a"}
