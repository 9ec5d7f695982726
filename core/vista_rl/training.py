"""The training-engine contract: what ``register_engines`` targets build and ``vista train`` runs.

An engine id names a factory called as ``factory(run=RunConfig, resume=path_or_None)`` (plus
``dry_run=True`` when its signature accepts it); the engine it returns runs the
config to the end.  Only this much is fixed, so that very different engines (the embedded
single-process trainer, verl on Ray) fit one command; everything else comes from the run config.
"""

from __future__ import annotations

from typing import Any, Protocol


class TrainingEngine(Protocol):
    """A made engine: ``run()`` trains and returns a JSON-able summary (shown by ``vista train``)."""

    def run(self) -> dict[str, Any]: ...

