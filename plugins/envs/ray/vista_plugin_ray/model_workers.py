"""Model workers as Ray actors: ``rollout.model_worker_mode: ray`` in ``vista eval``.

Each :class:`ModelWorker` actor discovers plugins in its own process (as the env workers do) and
builds the run config's backend once; the driver hands chunks of episodes to idle actors and
collects them with ``ray.wait``, so a GPU per actor (``actor_options: {num_gpus: 1}``) gives one
model replica per GPU.  Chunking, failed-episode records and timing sums are the core's
(:mod:`vista_rl.rollout.model_workers`), shared with the process pool.  An actor that dies fails
its chunk's episodes (recorded, not dropped) and is not used again; the others go on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

import vista_rl
from vista_rl import Trajectory
from vista_rl.config import RunConfig
from vista_rl.rollout import (
    EpisodeSpec,
    ModelWorkerError,
    RolloutTimings,
    add_timings,
    failed_trajectory,
    make_backend,
    make_chunks,
    run_chunk,
    warm_up,
)


class ModelWorker:
    """Plain class; the pool wraps it with ``ray.remote``."""

    def __init__(self, config_json: str) -> None:
        vista_rl.load_plugins()
        self.config = RunConfig.model_validate_json(config_json)
        self.backend = make_backend(self.config)
        warm_up(self.config)

    def ready(self) -> bool:
        return True

    def run(self, specs: list[EpisodeSpec]) -> tuple[list[Trajectory], dict[str, Any]]:
        trajectories: list[Trajectory] = []
        timings: dict[str, Any] = {}
        for item in run_chunk(self.backend, self.config, specs):
            if isinstance(item, Trajectory):
                trajectories.append(item)
            else:
                timings = {"model_s": item.model_s, "generate_calls": item.generate_calls,
                           "model_turns": item.model_turns, "env_steps": item.env_steps,
                           "tool_calls": item.tool_calls, "episodes": item.episodes, "wall_s": item.wall_s}
        return trajectories, timings

    def close(self) -> None:
        self.backend.close()


class RayModelWorkerPool:
    """``workers`` ModelWorker actors.  ``options``: ``actor_options`` (passed to ``.options()``,
    default ``{"num_cpus": 0}`` so CPU-only tests fit in a small local Ray), ``start_timeout_s``."""

    def __init__(self, config: RunConfig, workers: int, options: dict[str, Any] | None = None) -> None:
        if workers < 1:
            raise ValueError("a model worker pool needs at least one worker")
        options = dict(options or {})
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        self.config = config
        self.workers = workers
        self.timings = RolloutTimings()
        self.episodes_per_worker = [0] * workers
        actor_class = ray.remote(max_restarts=0, max_task_retries=0)(ModelWorker)
        actor_options = dict(options.get("actor_options") or {"num_cpus": 0})
        config_json = config.model_dump_json()
        self._actors: list[Any] = [actor_class.options(**actor_options).remote(config_json) for _ in range(workers)]
        self._alive = set(range(workers))
        try:
            ray.get([actor.ready.remote() for actor in self._actors], timeout=float(options.get("start_timeout_s", 600)))
        except (RayActorError, RayTaskError, GetTimeoutError) as exc:
            self.close()
            cause = getattr(exc, "cause", None) or exc
            raise ModelWorkerError(f"a Ray model worker could not start {config.model.backend}:"
                                   f"{config.model.path or ''}: {cause}") from None

    def stream(self, specs: Iterable[EpisodeSpec]) -> Iterator[Trajectory]:
        chunks = make_chunks(list(specs), self.workers, self.config.rollout.batch_size)
        queued = list(reversed(chunks))
        running: dict[Any, tuple[int, Any]] = {}  # ref -> (worker, chunk)
        idle = sorted(self._alive)
        while queued or running:
            while queued and idle:
                worker, chunk = idle.pop(0), queued.pop()
                running[self._actors[worker].run.remote(chunk.specs)] = (worker, chunk)
            if not running:  # every actor died: the rest cannot run
                for chunk in queued:
                    for spec, index in zip(chunk.specs, chunk.indices, strict=True):
                        yield failed_trajectory(spec, index, "every model worker died")
                return
            (ref,), _ = ray.wait(list(running), num_returns=1)
            worker, chunk = running.pop(ref)
            try:
                trajectories, timings = ray.get(ref)
            except (RayActorError, RayTaskError) as exc:
                if isinstance(exc, RayActorError):
                    self._alive.discard(worker)
                else:
                    idle.append(worker)
                reason = f"model worker {worker} failed during this chunk: {type(exc).__name__}"
                for spec, index in zip(chunk.specs, chunk.indices, strict=True):
                    yield failed_trajectory(spec, index, reason)
                continue
            idle.append(worker)
            add_timings(self.timings, timings)
            for trajectory in trajectories:
                trajectory.metadata["episode_index"] = chunk.indices[trajectory.metadata["episode_index"]]
                self.episodes_per_worker[worker] += 1
                yield trajectory

    def close(self) -> None:
        for actor in self._actors:
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                continue

    def __enter__(self) -> RayModelWorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
