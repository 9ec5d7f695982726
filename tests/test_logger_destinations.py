"""How a run tells where a tracker sends the run config and metrics (``vista_rl.loggers``): inside
the run directory, elsewhere on disk, or to a service.  What is not inside is printed at start
(issue 33); the trackers' own tests (plugins/engines/trackers) show the line for real MLflow stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from vista_rl.loggers import destination_kind


@pytest.mark.parametrize(("destination", "kind"), [
    ("http://mlflow:5000", "remote"), ("https://dbc.example.com", "remote"),
    ("databricks://profile", "remote"), ("databricks-uc:// (the Databricks workspace)", "remote"),
    ("postgresql://user@db/mlflow", "remote"), ("https://api.wandb.ai (W&B project team/p)", "remote"),
    ("file://otherhost/share/mlruns", "remote"),
    ("{run}/mlruns", "inside"), ("{run_uri}/mlruns", "inside"), ("file://localhost{run}/mlruns", "inside"),
    ("{run}/../elsewhere", "outside"), ("/tmp", "outside"), ("{other_uri}", "outside"),
    ("sqlite:///{run}/mlflow.db", "inside"), ("sqlite:///{other}/mlflow.db", "outside"), ("sqlite://", "inside"),
    ("databricks", "outside"),  # a bare word is a relative path here; the MLflow logger says databricks://
])
def test_destination_kind(tmp_path: Path, destination: str, kind: str) -> None:
    run, other = tmp_path / "run", tmp_path / "other"
    text = destination.format(run=run, run_uri=run.as_uri(), other=other, other_uri=other.as_uri())
    assert destination_kind(text, run) == kind


def test_relative_paths_are_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert destination_kind("runs/a/mlruns", Path("runs/a")) == "inside"
    assert destination_kind("sqlite:///runs/a/mlflow.db", tmp_path / "runs" / "a") == "inside"
    assert destination_kind("mlruns", Path("runs/a")) == "outside"
