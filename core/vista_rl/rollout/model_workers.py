"""Episodes spread over several model workers, each with its own backend and rollout engine.

Env workers (:mod:`vista_rl.rollout.workers`, the Ray env pool) parallelise env and tool calls; with
one backend the model is still one process.  ViGoRL evaluates with many model replicas, so
``rollout.model_workers = N`` starts N workers (processes here, or Ray actors through
``vista_plugin_ray.model_workers``), each building the run config's backend itself, and hands them
fixed chunks of episodes.  Why results match a one-worker run: an episode's trajectory depends only
on its spec (env, seed, sample) and the backend, never on which worker ran it, for a backend whose
output for a chat does not depend on its batch neighbours (``scripted:oracle``, a ``per_turn``
script, greedy decoding).  Trajectories come back with their global ``episode_index``.

Failure handling: a worker that cannot start fails the pool at once (a clear error, before any
episode); a worker that dies mid-run turns its unfinished episodes into failed trajectories
(``failure`` names the worker and exit code) and the other workers go on.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from multiprocessing.connection import Connection, wait
from typing import Any

import vista_rl
from vista_rl.config import RunConfig
from vista_rl.errors import VistaError
from vista_rl.model import ModelBackend
from vista_rl.rollout.engine import EpisodeSpec, RolloutEngine, RolloutTimings
from vista_rl.trajectory import Trajectory

#: ``rollout.model_worker_mode`` values and where their pool class lives.
POOLS = {"process": "vista_rl.rollout.model_workers:ProcessModelWorkerPool",
         "ray": "vista_plugin_ray.model_workers:RayModelWorkerPool"}


class ModelWorkerError(VistaError):
    """A model worker could not start (bad model path, missing plugin, out of memory)."""


@dataclass
class Chunk:
    """Consecutive episodes one worker runs as one engine stream; ``indices`` are global."""

    id: int
    indices: list[int]
    specs: list[EpisodeSpec]


def make_chunks(specs: Sequence[EpisodeSpec], workers: int, batch_size: int) -> list[Chunk]:
    """Consecutive chunks of at most one engine batch each, and at least two per worker when there
    are enough episodes, so one slow chunk does not leave the other workers idle at the end."""
    if not specs:
        return []
    size = max(1, min(batch_size, math.ceil(len(specs) / (2 * workers))))
    return [Chunk(k, list(range(start, min(start + size, len(specs)))), list(specs[start:start + size]))
            for k, start in enumerate(range(0, len(specs), size))]


def make_backend(config: RunConfig) -> ModelBackend:
    """The run config's backend (what each worker builds for itself)."""
    kwargs = dict(config.model.config)
    if config.model.path is not None:
        kwargs["path"] = config.model.path
    return vista_rl.make_model(config.model.backend, **kwargs)


def warm_up(config: RunConfig) -> None:
    """Make and close one env of the run, so plugin imports happen while the worker starts, not in
    its first chunk.  A failure here is not the worker's: episodes record it themselves."""
    with contextlib.suppress(Exception):
        vista_rl.make_env(config.env.id, **config.env.config).close()


def run_chunk(backend: ModelBackend, config: RunConfig, specs: Sequence[EpisodeSpec]) -> Iterator[Trajectory | RolloutTimings]:
    """Run one chunk on a fresh engine: its trajectories (local ``episode_index``), then its timings."""
    with RolloutEngine(backend, config.rollout, seed=config.seed) as engine:
        yield from engine.stream(specs)
        yield engine.timings


def add_timings(total: RolloutTimings, part: RolloutTimings | dict[str, Any]) -> None:
    """Sum a worker's timings into ``total`` (``wall_s`` too: worker-seconds, not the run's wall)."""
    values = part if isinstance(part, dict) else {f.name: getattr(part, f.name) for f in fields(part)}
    for f in fields(total):
        setattr(total, f.name, getattr(total, f.name) + values.get(f.name, 0))


def failed_trajectory(spec: EpisodeSpec, index: int, reason: str) -> Trajectory:
    """The record of an episode lost with its worker (counted as a failure, never dropped)."""
    trajectory = Trajectory(env_id=spec.env_id, seed=spec.seed, sample_index=spec.sample_index, failure=reason)
    trajectory.metadata.update(dict(spec.metadata))
    trajectory.metadata.update(episode_index=index, group_id=spec.group_id or f"{spec.env_id}:{spec.seed}",
                               stop_reason="worker_error")
    return trajectory


def make_pool(config: RunConfig) -> Any:
    """The pool ``rollout.model_worker_mode`` names, with ``rollout.model_workers`` workers."""
    mode = config.rollout.model_worker_mode
    try:
        pool_class = vista_rl.resolve_import_path(POOLS[mode])
    except ImportError as exc:
        raise ModelWorkerError(f"model_worker_mode={mode!r} needs {POOLS[mode].split('.')[0]} "
                               f"(pip install vista-plugin-ray): {exc}") from None
    return pool_class(config, config.rollout.model_workers, options=config.rollout.model_worker_options)


# ------------------------------------------------------------------------------ processes
def _process_main(config_json: str, worker: int, connection: Connection) -> None:
    """A worker process: build the backend, then run the chunks sent on ``connection`` until ``None``.

    One pipe per worker, not shared queues: a worker killed while holding a shared queue's lock
    would block every other worker on it."""
    try:
        config = RunConfig.model_validate_json(config_json)
        backend = make_backend(config)
        warm_up(config)
    except BaseException as exc:  # noqa: BLE001 - reported to the driver, which raises a clear error
        connection.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    connection.send(("ready", None))
    try:
        while True:
            try:
                job = connection.recv()
            except EOFError:  # the driver went away
                break
            if job is None:
                break
            for item in run_chunk(backend, config, job):
                connection.send(("trajectory", item) if isinstance(item, Trajectory) else ("done", item))
    finally:
        backend.close()


class ProcessModelWorkerPool:
    """``workers`` spawned processes (spawn, not fork: a forked torch or CUDA process is unsafe),
    each fed chunks through its own pipe as soon as it is idle.

    ``options``: ``start_timeout_s`` (default 600: a worker loading a large model takes minutes)."""

    def __init__(self, config: RunConfig, workers: int, options: dict[str, Any] | None = None) -> None:
        if workers < 1:
            raise ValueError("a model worker pool needs at least one worker")
        options = dict(options or {})
        self.config = config
        self.timings = RolloutTimings()
        self.workers = workers
        self.episodes_per_worker = [0] * workers
        context = multiprocessing.get_context("spawn")
        config_json = config.model_dump_json()
        self._connections: list[Connection] = []
        self._processes: list[Any] = []
        self._dead: set[int] = set()
        self._closed = False
        for k in range(workers):
            ours, theirs = context.Pipe(duplex=True)
            process = context.Process(target=_process_main, args=(config_json, k, theirs),
                                      name=f"vista-model-worker-{k}", daemon=True)
            process.start()
            theirs.close()  # only the child holds its end now, so its death reads as EOF here
            self._connections.append(ours)
            self._processes.append(process)
        try:
            self._await_ready(float(options.get("start_timeout_s", 600.0)))
        except BaseException:
            self.close()
            raise

    def _receive(self, worker: int) -> tuple[str, Any] | None:
        """The next message of a worker, or ``None`` when its pipe is closed (it died)."""
        try:
            return self._connections[worker].recv()  # type: ignore[no-any-return]
        except (EOFError, OSError):
            self._dead.add(worker)
            return None

    def _await_ready(self, timeout: float) -> None:
        waiting = set(range(self.workers))
        deadline = time.monotonic() + timeout
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ModelWorkerError(f"model workers {sorted(waiting)} did not start within {timeout:g}s")
            by_connection = {id(self._connections[k]): k for k in waiting}
            for connection in wait([self._connections[k] for k in waiting], timeout=min(remaining, 1.0)):
                worker = by_connection[id(connection)]
                message = self._receive(worker)
                if message is None:
                    raise ModelWorkerError(f"model worker {worker} exited while starting "
                                           f"(exit code {self._processes[worker].exitcode})")
                if message[0] == "error":
                    raise ModelWorkerError(f"model worker {worker} could not start "
                                           f"{self.config.model.backend}:{self.config.model.path or ''}: {message[1]}")
                waiting.discard(worker)

    def stream(self, specs: Iterable[EpisodeSpec]) -> Iterator[Trajectory]:
        """Trajectories as episodes finish, each with its global ``episode_index``."""
        queued = list(reversed(make_chunks(list(specs), self.workers, self.config.rollout.batch_size)))
        running: dict[int, tuple[Chunk, set[int]]] = {}  # worker -> (chunk, local indices not yet back)
        while queued or running:
            for worker in range(self.workers):
                if queued and worker not in running and worker not in self._dead:
                    chunk = queued.pop()
                    try:
                        self._connections[worker].send(chunk.specs)
                    except (OSError, BrokenPipeError):
                        self._dead.add(worker)
                        queued.append(chunk)
                        continue
                    running[worker] = (chunk, set(range(len(chunk.specs))))
            if not running:  # every worker died: what is left cannot run
                for chunk in queued:
                    for spec, index in zip(chunk.specs, chunk.indices, strict=True):
                        yield failed_trajectory(spec, index, "every model worker died")
                return
            by_connection = {id(self._connections[k]): k for k in running}
            for connection in wait([self._connections[k] for k in running], timeout=1.0):
                worker = by_connection[id(connection)]
                chunk, left = running[worker]
                message = self._receive(worker)
                if message is None:
                    del running[worker]
                    self._processes[worker].join(timeout=5)
                    reason = (f"model worker {worker} died (exit code {self._processes[worker].exitcode}) "
                              "during this episode")
                    for local in sorted(left):
                        yield failed_trajectory(chunk.specs[local], chunk.indices[local], reason)
                    continue
                kind, payload = message
                if kind == "trajectory":
                    local = payload.metadata["episode_index"]
                    left.discard(local)
                    payload.metadata["episode_index"] = chunk.indices[local]
                    self.episodes_per_worker[worker] += 1
                    yield payload
                else:  # "done": the chunk's timings
                    add_timings(self.timings, payload)
                    del running[worker]
                    for local in sorted(left):  # none, unless the engine dropped an episode
                        yield failed_trajectory(chunk.specs[local], chunk.indices[local],
                                                "the worker returned no trajectory")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for worker, connection in enumerate(self._connections):
            if worker not in self._dead:
                with contextlib.suppress(OSError, BrokenPipeError):
                    connection.send(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        for connection in self._connections:
            connection.close()

    def __enter__(self) -> ProcessModelWorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
