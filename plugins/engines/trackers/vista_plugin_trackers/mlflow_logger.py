"""MLflow as a VISTA logger, through ``MlflowClient`` (no global active run, so several runs and
other MLflow users in one process never interfere)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from vista_rl import MetricsLogger, RunStatus, flat_config, scalar_metrics

#: What MLflow refuses in a param or metric name (env config keys are the user's own words).
_NOT_A_NAME = re.compile(r"[^\w\-./ ]")
#: MLflow's end states for how a VISTA run ended.
END_STATES = {"completed": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}


class MlflowLogger(MetricsLogger):
    """``trainer.loggers: [{id: mlflow, tracking_uri: ..., experiment: ...}]``.

    Without ``tracking_uri`` the run goes to a local file store in ``RUN_DIR/mlruns``
    (``mlflow ui --backend-store-uri file:RUN_DIR/mlruns`` shows it).  MLflow 3 keeps the file store
    in maintenance mode behind ``MLFLOW_ALLOW_FILE_STORE``; choosing a ``file:`` store here is that
    opt-in, so it is set for the process unless the user set it.  Any other URI (``sqlite:///...``,
    ``http://server:5000``) is used as given.  The run config becomes params (``trainer.lr``, ...)
    and each record's numbers metrics at the engine's global step.
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str = "vista", run_name: str | None = None,
                 tags: dict[str, str] | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_name = run_name
        self.tags = dict(tags or {})
        self.client: Any = None
        self.run_id: str | None = None

    def destination(self, run_dir: Path) -> str:
        """The tracking URI the run's config and metrics go to (the run engine prints it at start
        when it is remote or outside ``run_dir``)."""
        uri = self.tracking_uri or (run_dir.resolve() / "mlruns").as_uri()
        if uri in ("databricks", "databricks-uc"):  # MLflow's names for the default profile's workspace
            return f"{uri}:// (the Databricks workspace of the default profile)"
        return uri

    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_PARAMS_TAGS_PER_BATCH

        uri = self.tracking_uri or (run_dir.resolve() / "mlruns").as_uri()
        if uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        found = self.client.get_experiment_by_name(self.experiment)
        experiment_id = found.experiment_id if found is not None else self.client.create_experiment(self.experiment)
        run = self.client.create_run(experiment_id, run_name=self.run_name or run_dir.name, tags=self.tags)
        self.run_id = run.info.run_id
        params = [Param(_name(key), value[:MAX_PARAM_VAL_LENGTH]) for key, value in flat_config(config).items()]
        for first in range(0, len(params), MAX_PARAMS_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, params=params[first:first + MAX_PARAMS_TAGS_PER_BATCH])

    def log(self, metrics: dict[str, Any], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        batch = [Metric(_name(key), value, now, step) for key, value in scalar_metrics(metrics).items()]
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def finish(self, status: RunStatus) -> None:
        if self.client is not None and self.run_id is not None:
            self.client.set_terminated(self.run_id, END_STATES[status])
            self.run_id = None


def _name(key: str) -> str:
    return _NOT_A_NAME.sub("_", key)
