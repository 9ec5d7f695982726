"""The engine side of experiment trackers: make the loggers a run names, feed them all the same
records, and keep any of them from stopping training (the contract is :mod:`vista_rl.logger`).

Where the data goes is said at start.  A tracker gets the whole run config and every metric, and a
config can point it anywhere (an MLflow ``tracking_uri`` of any URL or any folder on disk, wandb
``mode: online``).  A logger may say where with an optional ``destination(run_dir) -> str | None``
method (a URL, a ``file:`` or ``sqlite:`` URI, or a path); :meth:`RunLoggers.start` records it in
``loggers.json`` and prints, before that logger's ``start`` sends anything, each destination that
is remote or outside the run directory, naming the logger.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from vista_rl._plugins import host
from vista_rl.errors import ConfigError, UnknownItemError
from vista_rl.logger import LoggerWarning, RunStatus

#: Per-logger outcome a run records (also under ``loggers`` in ``results.json``).
LOGGERS_FILE = "loggers.json"
#: A URI scheme; one letter is a Windows drive (``C:\\runs``), not a scheme.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")
DestinationKind = Literal["inside", "outside", "remote"]


def destination_kind(destination: str, run_dir: Path) -> DestinationKind:
    """Whether a tracker's ``destination`` lies inside ``run_dir``, elsewhere on this machine's disk
    (``outside``), or behind a service (``remote``: any URI other than ``file:`` and ``sqlite:``,
    e.g. ``http://``, ``databricks``, ``postgresql://``).  Relative paths are relative to the
    working directory, as the trackers open them."""
    scheme = _SCHEME.match(destination)
    path: str = destination
    if scheme:
        name = scheme.group(1).lower()
        if name == "file":
            parsed = urlparse(destination)
            if parsed.netloc not in ("", "localhost"):
                return "remote"
            path = url2pathname(unquote(parsed.path))
        elif name == "sqlite":
            rest = destination[len(scheme.group(0)):]
            if not rest.startswith("///"):  # sqlite:// is an in-memory database: nothing leaves
                return "inside"
            path = rest[3:]  # SQLAlchemy: sqlite:///relative.db, sqlite:////absolute.db
        else:
            return "remote"
    target = Path(path).expanduser()
    inside = target.resolve().is_relative_to(run_dir.resolve())
    return "inside" if inside else "outside"


def logger_destination(logger: Any, run_dir: Path) -> str | None:
    """What ``logger.destination(run_dir)`` says (``None`` when it has no such method)."""
    method = getattr(logger, "destination", None)
    if not callable(method):
        return None
    destination = method(run_dir)
    return str(destination) if destination is not None else None


def logger_entries(choices: Iterable[str | Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """``trainer.loggers`` entries as ``(id, options)``: a name, or ``{id: NAME, **options}``."""
    entries: list[tuple[str, dict[str, Any]]] = []
    for choice in choices:
        if isinstance(choice, str):
            entries.append((choice, {}))
        else:
            options = dict(choice)
            entries.append((str(options.pop("id")), options))
    return entries


def check_loggers(choices: Iterable[str | Mapping[str, Any]]) -> None:
    """Fail before training when ``trainer.loggers`` names a logger no installed plugin registers."""
    for logger_id, _ in logger_entries(choices):
        try:
            host().spec("loggers", logger_id)
        except UnknownItemError as exc:
            raise ConfigError(f"trainer.loggers: {exc}") from None


class RunLoggers:
    """The loggers of one run, fed the same records; none of them can stop training.

    A logger that raises (while being made, in ``start``, ``log`` or ``finish``) is warned about
    once, recorded as failed with the phase and the error, and gets no further records; ``finish``
    still runs on it so it can release what it holds.  :meth:`report` is what the run records.
    """

    def __init__(self, choices: Iterable[str | Mapping[str, Any]]) -> None:
        choices = list(choices)
        check_loggers(choices)  # a typo in the config is the user's to fix, not a tracker failure
        self.run_dir: Path | None = None
        self._loggers: dict[str, Any] = {}
        self._status: dict[str, dict[str, Any]] = {}
        for logger_id, options in logger_entries(choices):
            self._status[logger_id] = {"status": "ok"}
            try:
                self._loggers[logger_id] = host().make("loggers", logger_id, **options)
            except Exception as exc:  # a tracker that cannot even be made must not stop training
                self._fail(logger_id, "make", exc)

    @property
    def names(self) -> list[str]:
        return list(self._status)

    def start(self, run_dir: Path, config: dict[str, Any]) -> None:
        """Open every logger's run; a destination that is remote or outside ``run_dir`` is printed
        (stderr) before that logger is handed the config."""
        self.run_dir = run_dir
        for name, logger in list(self._loggers.items()):
            try:
                self._announce(name, logger, run_dir)
                logger.start(run_dir, config)
            except Exception as exc:
                self._fail(name, "start", exc)
        self._write()

    def _announce(self, name: str, logger: Any, run_dir: Path) -> None:
        destination = logger_destination(logger, run_dir)
        if destination is None:
            return
        kind = destination_kind(destination, run_dir)
        self._status[name].update(destination=destination, destination_kind=kind)
        if kind != "inside":
            where = "a remote service" if kind == "remote" else f"outside the run directory {run_dir}"
            print(f"vista: logger {name!r} sends the run config and metrics to {destination} ({where})",
                  file=sys.stderr, flush=True)

    def log(self, metrics: dict[str, Any], step: int) -> None:
        for name, logger in list(self._loggers.items()):
            if self._status[name]["status"] != "ok":
                continue
            try:
                logger.log(metrics, step)
            except Exception as exc:
                self._fail(name, "log", exc, step=step)

    def finish(self, status: RunStatus) -> None:
        for name, logger in list(self._loggers.items()):
            try:
                logger.finish(status)
            except Exception as exc:
                if self._status[name]["status"] == "ok":
                    self._fail(name, "finish", exc)
        self._loggers.clear()
        self._write()

    def report(self) -> dict[str, dict[str, Any]]:
        """``{logger id: {"status": "ok"} or {"status": "failed", "phase": ..., "error": ...}}``, with
        ``destination`` and ``destination_kind`` for loggers that say where they send the run."""
        return {name: dict(state) for name, state in self._status.items()}

    def _fail(self, name: str, phase: str, exc: BaseException, step: int | None = None) -> None:
        error = f"{type(exc).__name__}: {exc}"
        kept = {key: self._status.get(name, {}).get(key) for key in ("destination", "destination_kind")}
        state: dict[str, Any] = {"status": "failed", "phase": phase, "error": error,
                                 **{key: value for key, value in kept.items() if value is not None}}
        if step is not None:
            state["step"] = step
        self._status[name] = state
        warnings.warn(f"logger {name!r} failed in {phase} ({error}); training goes on without it",
                      LoggerWarning, stacklevel=3)
        self._write()

    def _write(self) -> None:
        if self.run_dir is None:
            return
        with contextlib.suppress(OSError):  # a courtesy record; a full disk shows up in the checkpoint
            (self.run_dir / LOGGERS_FILE).write_text(json.dumps(self.report(), indent=2))


__all__ = ["LOGGERS_FILE", "DestinationKind", "RunLoggers", "check_loggers", "destination_kind", "logger_destination",
           "logger_entries"]
