"""wandb (offline) and MLflow (local file store) as loggers of a real tiny local-engine run, read back
with wandb's own record classes and MLflow's own client: they hold exactly what the JSONL record holds,
and the run config; a logger that raises is warned about once and the run completes."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from vista_plugin_trackers.wandb_offline import OfflineRunError, read_offline_run, run_files

import vista_rl
from vista_rl import LoggerWarning, MetricsLogger, flat_config, scalar_metrics
from vista_rl.config import RunConfig, validate_config

pytest.importorskip("transformers")
pytest.importorskip("wandb")
pytest.importorskip("mlflow")


class Exploding(MetricsLogger):
    """A tracker whose every ``log`` call raises (a dead server, a bug in a third-party logger)."""

    calls = 0

    def log(self, metrics: dict[str, Any], step: int) -> None:
        Exploding.calls += 1
        raise ConnectionError("tracker unreachable")


def _exploding_plugin() -> SimpleNamespace:
    @vista_rl.hookimpl
    def register_loggers(register: vista_rl.RegisterLogger) -> None:
        register("test/exploding", Exploding)

    return SimpleNamespace(register_loggers=register_loggers)


def _series(rows: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """What every logger should have got: each scalar's (global step, value) history."""
    out: dict[str, list[tuple[int, float]]] = {}
    for row in rows:
        for name, value in scalar_metrics(row).items():
            out.setdefault(name, []).append((int(row["global_step"]), value))
    return out


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_a_run_writes_wandb_offline_and_mlflow_with_what_jsonl_got(
        tmp_path: Path, tiny_model_dir: Path, vista_plugin: Callable[..., str]) -> None:
    from mlflow.tracking import MlflowClient

    vista_plugin(_exploding_plugin(), name="exploding")
    out = tmp_path / "run"
    run = validate_config(RunConfig, {
        "seed": 3, "output_dir": str(out),
        "env": {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 28, "prompt_format": "no_think"}},
        "model": {"path": str(tiny_model_dir)},
        "rollout": {"max_turns": 1, "group_size": 2, "batch_size": 4, "sampling": {"temperature": 1.0, "max_tokens": 5}},
        "trainer": {"steps": 2, "seeds_per_step": 2, "micro_batch_size": 2, "train_seeds": {"start": 0, "count": 50},
                    "loggers": ["jsonl", {"id": "wandb", "project": "vista-test"}, "mlflow", "test/exploding"]},
        "sft": {"steps": 0},
        "eval": {"seeds": {"start": 1000, "count": 2}, "at_start": False},
    })
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = vista_rl.make_engine("local", run=run).run()
    failed = [w for w in caught if issubclass(w.category, LoggerWarning)]
    assert len(failed) == 1 and "test/exploding" in str(failed[0].message) and Exploding.calls == 1
    assert results["loggers"]["test/exploding"] == {"status": "failed", "phase": "log",
                                                     "error": "ConnectionError: tracker unreachable", "step": 1}
    assert {k: v["status"] for k, v in results["loggers"].items() if k != "test/exploding"} == {
        "jsonl": "ok", "wandb": "ok", "mlflow": "ok"}
    assert json.loads((out / "loggers.json").read_text()) == results["loggers"]

    rows = _jsonl(out / "metrics.jsonl") + _jsonl(out / "eval.jsonl")
    assert [r["stage"] for r in rows] == ["rl", "rl", "eval"]
    expected = _series(rows)
    assert {"rl/reward_mean", "rl/loss", "eval/success/value"} <= set(expected)
    config = run.model_dump(mode="json")

    (wandb_file,) = run_files(out)
    offline = read_offline_run(wandb_file)
    assert offline.exit_code == 0
    assert {k: v for k, v in offline.config.items() if k != "_wandb"} == config
    got: dict[str, list[tuple[int, float]]] = {}
    for row in offline.history:
        for name, value in row.items():
            if not name.startswith("_"):
                got.setdefault(name, []).append((row["_step"], value))
    assert got == expected
    assert offline.summary["rl/reward_mean"] == expected["rl/reward_mean"][-1][1]

    client = MlflowClient(tracking_uri=(out / "mlruns").resolve().as_uri())
    (mlrun,) = client.search_runs([client.get_experiment_by_name("vista").experiment_id])
    assert mlrun.info.status == "FINISHED" and mlrun.info.run_name == "run"
    assert mlrun.data.params == flat_config(config)
    history = {name: [(m.step, m.value) for m in client.get_metric_history(mlrun.info.run_id, name)]
               for name in expected}
    assert history == expected


def test_offline_reader_refuses_other_files(tmp_path: Path) -> None:
    path = tmp_path / "run-x.wandb"
    path.write_bytes(b"PK\x03\x04 not a run log")
    with pytest.raises(OfflineRunError, match="bad header"):
        read_offline_run(path)


def test_plugin_registers_both_trackers_lazily() -> None:
    specs = {name: vista_rl.host().spec("loggers", name) for name in ("wandb", "mlflow")}
    assert {s.distribution for s in specs.values()} == {"vista-plugin-trackers"}
    assert isinstance(vista_rl.make_logger("wandb", project="p"), MetricsLogger)
    with pytest.raises(ValueError, match="mode must be"):
        vista_rl.make_logger("wandb", mode="shared")
