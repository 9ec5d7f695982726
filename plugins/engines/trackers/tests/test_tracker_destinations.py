"""Trackers get the whole run config and every metric, and a config can send them anywhere: an MLflow
``tracking_uri`` of any URL or folder, wandb ``mode: online``.  So a destination that is remote or
outside the run directory is printed at start, naming the logger, before the logger is handed the
config (issue 33: "documented, but no warning names it").  Real MLflow against a real file store and
a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from vista_plugin_trackers.mlflow_logger import MlflowLogger
from vista_plugin_trackers.wandb_logger import WandbLogger

from vista_rl import RunLoggers

pytest.importorskip("mlflow")

LOGGERS_FILE = "loggers.json"  # the run's per-logger record
CONFIG = {"seed": 7, "trainer": {"lr": 0.001}, "env": {"id": "secret/env-v0"}}


def _announced(err: str) -> list[str]:
    return [line for line in err.splitlines() if "sends the run config and metrics to" in line]


def test_an_mlflow_store_outside_the_run_directory_is_printed_and_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere" / "mlruns"
    run_dir.mkdir()
    uri = elsewhere.as_uri()
    loggers = RunLoggers([{"id": "mlflow", "tracking_uri": uri}])
    loggers.start(run_dir, CONFIG)
    lines = _announced(capsys.readouterr().err)
    assert lines == [f"vista: logger 'mlflow' sends the run config and metrics to {uri} "
                     f"(outside the run directory {run_dir})"]
    loggers.finish("completed")
    assert elsewhere.is_dir(), "the store was written where the line says"
    record = json.loads((run_dir / LOGGERS_FILE).read_text())["mlflow"]
    assert record == {"status": "ok", "destination": uri, "destination_kind": "outside"}


def test_the_default_mlflow_store_inside_the_run_directory_is_not_announced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    loggers = RunLoggers(["mlflow"])
    loggers.start(tmp_path, CONFIG)
    loggers.finish("completed")
    assert _announced(capsys.readouterr().err) == []
    assert json.loads((tmp_path / LOGGERS_FILE).read_text())["mlflow"]["destination_kind"] == "inside"


class _Recorder(BaseHTTPRequestHandler):
    """An HTTP server that is no MLflow server: it records each request and answers 500."""

    seen: list[str] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        type(self).seen.append(f"{self.command} {self.path}")
        body = b'{"error_code": "INTERNAL_ERROR", "message": "not an mlflow server"}'
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    _Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_mlflow_uri_is_printed_naming_the_logger(
        tmp_path: Path, http_server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    loggers = RunLoggers([{"id": "mlflow", "tracking_uri": http_server}])
    with pytest.warns(Warning, match="logger 'mlflow' failed in start"):
        loggers.start(tmp_path, CONFIG)
    err = capsys.readouterr().err
    assert _announced(err) == [f"vista: logger 'mlflow' sends the run config and metrics to {http_server} "
                               "(a remote service)"]
    assert _Recorder.seen, "the logger did contact the server the line named"
    report = loggers.report()["mlflow"]
    assert report["status"] == "failed" and report["phase"] == "start"
    assert report["destination"] == http_server and report["destination_kind"] == "remote"
    loggers.finish("failed")


def test_wandb_online_names_the_service_and_offline_stays_in_the_run_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(How the engine classifies these strings is tested in the core: tests/test_logger_destinations.py.)"""
    monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    online = WandbLogger(project="p", entity="team", mode="online").destination(tmp_path)
    assert online == "https://api.wandb.ai (W&B project team/p)"
    monkeypatch.setenv("WANDB_BASE_URL", "http://wandb.internal:8080/")
    assert WandbLogger(mode="online").destination(tmp_path) == "http://wandb.internal:8080 (W&B project vista)"
    assert WandbLogger().destination(tmp_path) == str(tmp_path / "wandb")
    assert MlflowLogger().destination(tmp_path) == (tmp_path.resolve() / "mlruns").as_uri()
    for workspace in ("databricks", "databricks-uc"):  # MLflow's bare names for a remote workspace
        assert MlflowLogger(tracking_uri=workspace).destination(tmp_path).startswith(f"{workspace}://")


def test_vista_train_prints_an_outside_mlflow_store_at_start(tmp_path: Path, tiny_model_dir: Path,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole path: ``vista train`` with a tracker pointed outside the run directory (a run with no
    training stages, so it only starts and finishes its loggers)."""
    pytest.importorskip("transformers")
    import yaml

    from vista_rl.cli import main

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    elsewhere = (tmp_path / "shared" / "mlruns").as_uri()
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump({
        "output_dir": str(tmp_path / "run"),
        "env": {"id": "oddshape/odd-colour-v0", "config": {"grid": 2, "cell_size": 28, "prompt_format": "no_think"}},
        "model": {"path": str(tiny_model_dir)},
        "trainer": {"steps": 0, "loggers": ["jsonl", {"id": "mlflow", "tracking_uri": elsewhere}]},
        "sft": {"steps": 0}, "eval": {"at_start": False, "seeds": {"start": 1000, "count": 2}},
    }))
    try:
        main(["train", str(config)])
    except SystemExit as exc:
        assert not exc.code
    assert _announced(capsys.readouterr().err) == [
        f"vista: logger 'mlflow' sends the run config and metrics to {elsewhere} "
        f"(outside the run directory {tmp_path / 'run'})"]
    assert (tmp_path / "shared" / "mlruns").is_dir()
