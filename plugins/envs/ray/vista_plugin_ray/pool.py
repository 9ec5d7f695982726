"""A pool of Ray env workers and ``RayEnv``, the Env proxy the rollout engine uses like a local env.

Failure handling (why this module exists rather than plain actor calls):

- A worker that dies (``ray.kill``, OOM, node loss) or hangs past ``call_timeout_s`` is killed and
  replaced by a fresh actor; the pool keeps a *generation* per worker slot so every env on the dead
  worker notices and restores itself on its next call, and concurrent detections replace it once.
- ``recovery="replay"`` (default) restores an episode on the new worker by resetting with the same
  seed and replaying the actions so far (envs are deterministic per seed: the core's contract); the
  replayed first observation is compared with the original and a mismatch marks the episode failed
  rather than silently training on a different episode.  ``recovery="fail"`` ends the episode with
  ``truncated=True`` and ``info["env_error"]``.
- Every wait has a timeout, so nothing hangs; ``step`` never raises (the Env contract).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import uuid
from collections.abc import Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from vista_plugin_ray.env_config import RayEnvConfig, Recovery
from vista_plugin_ray.worker import EnvWorker
from vista_rl import Env, Observation, StepResult, VistaError, observation_fingerprint


class EnvWorkerError(VistaError):
    """An env worker could not be reached or restored."""


class WorkerLost(Exception):
    """The actor behind a call died or hung (internal signal)."""


def _failed_step(message: str, **info: Any) -> StepResult:
    return StepResult(Observation(f"Environment error: {message}"), 0.0, False, True,
                      {"env_error": message, "success": False, **info})


class RayEnvPool:
    """``num_workers`` env-worker actors; envs are placed round-robin, many per worker.

    ``ray.init`` is the caller's business (a local ``ray.init(num_cpus=2)`` or a cluster address);
    if Ray is not initialised, a local instance is started (without the dashboard, which a CLI run
    does not need and which only adds start-up time and log noise).
    """

    def __init__(self, env: str, config: dict[str, Any] | None = None, *, num_workers: int = 2,
                 recovery: Recovery = "replay", call_timeout_s: float = 60.0, max_restarts: int = 3,
                 actor_options: dict[str, Any] | None = None, start_timeout_s: float = 120.0) -> None:
        if num_workers < 1:
            raise ValueError("a Ray env pool needs at least one worker")
        if recovery not in ("replay", "fail"):
            raise ValueError(f"recovery must be 'replay' or 'fail', not {recovery!r}")
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        self.env = env
        self.config = dict(config or {})
        self.recovery: Recovery = recovery
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.max_restarts = max_restarts
        self._actor_class = ray.remote(max_restarts=0, max_task_retries=0)(EnvWorker)
        self._actor_options = dict(actor_options or {})
        self._lock = threading.Lock()
        self._workers = [self._spawn() for _ in range(num_workers)]
        self._generations = [0] * num_workers
        self._next = itertools.count()
        self.replacements = 0
        self._closed = False

    # ------------------------------------------------------------------ workers
    def _spawn(self) -> Any:
        return self._actor_class.options(**self._actor_options).remote()

    @property
    def num_workers(self) -> int:
        return len(self._workers)

    def worker(self, index: int) -> tuple[Any, int]:
        with self._lock:
            return self._workers[index], self._generations[index]

    def replace(self, index: int, generation: int) -> tuple[Any, int]:
        """Replace worker ``index`` if it is still the given generation (so concurrent detections of
        one death replace it once); returns the current handle and generation."""
        with self._lock:
            if self._closed:
                raise EnvWorkerError("the Ray env pool is closed")
            if self._generations[index] == generation:
                ray.kill(self._workers[index], no_restart=True)
                self._workers[index] = self._spawn()
                self._generations[index] += 1
                self.replacements += 1
            return self._workers[index], self._generations[index]

    def worker_info(self, index: int, timeout_s: float | None = None) -> dict[str, Any]:
        handle, _ = self.worker(index)
        return dict(ray.get(handle.info.remote(), timeout=timeout_s or self.call_timeout_s))

    # --------------------------------------------------------------------- envs
    def make_env(self, **config: Any) -> RayEnv:
        """A new env on the next worker (round-robin); ``config`` overrides the pool's."""
        index = next(self._next) % self.num_workers
        return RayEnv(self, index, {**self.config, **config})

    def step_batch(self, envs: Sequence[RayEnv], actions: Sequence[str]) -> list[StepResult]:
        """Step many envs at once: all calls are in flight together (across workers), then gathered.
        Failed ones go through each env's own recovery."""
        if len(envs) != len(actions):
            raise ValueError("step_batch needs one action per env")
        pending = [env.submit_step(action) for env, action in zip(envs, actions, strict=True)]
        return [env.finish_step(action, ref) for env, action, ref in zip(envs, actions, pending, strict=True)]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
        for handle in workers:
            ray.kill(handle, no_restart=True)

    def __enter__(self) -> RayEnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RayEnv(Env):
    """One env living in a slot of a pool worker; a vista Env in every respect."""

    def __init__(self, pool: RayEnvPool, index: int, config: dict[str, Any]) -> None:
        self.pool = pool
        self.index = index
        self.config = config
        self.slot = uuid.uuid4().hex
        self.restarts = 0
        self._seed: int | None = None
        self._actions: list[str] = []
        self._first_fingerprint: str | None = None
        self._episode_open = False
        self._closed = False
        self._handle, self._generation = pool.worker(index)
        self._system_prompt, self.tools = self._create(self._handle)

    # ------------------------------------------------------------------ plumbing
    def _get(self, ref: Any, timeout_s: float | None = None) -> Any:
        try:
            return ray.get(ref, timeout=timeout_s or self.pool.call_timeout_s)
        except (RayActorError, GetTimeoutError) as exc:
            raise WorkerLost(f"{type(exc).__name__}: {exc}") from None

    def _create(self, handle: Any) -> tuple[str, tuple[str, ...]]:
        try:
            # a fresh actor may still be starting (imports, plugin discovery): give creation more time
            prompt, tools = self._get(handle.create.remote(self.slot, self.pool.env, self.config),
                                      max(self.pool.call_timeout_s, self.pool.start_timeout_s))
        except RayTaskError as exc:
            raise EnvWorkerError(f"could not create {self.pool.env} on a Ray worker: {exc.cause!r}") from None
        return str(prompt), tuple(tools)

    def _rebind(self) -> None:
        """Move to the replacement worker (replacing it first if it is still the dead one)."""
        if self.restarts >= self.pool.max_restarts:
            raise EnvWorkerError(f"gave up after {self.restarts} worker restarts")
        self.restarts += 1
        self._handle, self._generation = self.pool.replace(self.index, self._generation)
        self._create(self._handle)

    def _ensure_current(self) -> None:
        """If another env already replaced our worker, our slot died with it: restore it."""
        handle, generation = self.pool.worker(self.index)
        if generation != self._generation:
            self._handle, self._generation = handle, generation
            self.restarts += 1
            self._create(handle)
            if self._episode_open:
                self._replay()

    def _replay(self) -> None:
        if self.pool.recovery != "replay":
            raise EnvWorkerError("the worker died mid-episode (recovery='fail')")
        observation, _ = self._get(self._handle.reset.remote(self.slot, self._seed))
        if observation_fingerprint(observation) != self._first_fingerprint:
            raise EnvWorkerError("replay gave a different first observation: the env is not deterministic")
        for action in self._actions:
            self._get(self._handle.step.remote(self.slot, action))

    # ----------------------------------------------------------------------- Env
    def system_prompt(self) -> str:
        return self._system_prompt

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self._episode_open = False
        for _attempt in range(2):
            try:
                self._ensure_current()
                observation, info = self._get(self._handle.reset.remote(self.slot, seed))
                break
            except WorkerLost:
                self._rebind()
            except RayTaskError as exc:
                raise EnvWorkerError(f"{self.pool.env} reset raised on its worker: {exc.cause!r}") from None
        else:
            raise EnvWorkerError(f"reset of {self.pool.env} failed twice on fresh Ray workers")
        self._seed, self._actions = seed, []
        self._first_fingerprint = observation_fingerprint(observation)
        self._episode_open = True
        return observation, info

    def submit_step(self, action: str) -> Any:
        """Start a step without waiting (for batches); ``finish_step`` collects it."""
        try:
            self._ensure_current()
        except WorkerLost:
            return None  # finish_step recovers
        except EnvWorkerError as exc:
            return exc  # the episode is lost (recovery='fail' or replay failed)
        return self._handle.step.remote(self.slot, action)

    def finish_step(self, action: str, ref: Any) -> StepResult:
        if isinstance(ref, EnvWorkerError):
            self._episode_open = False
            return _failed_step(f"the env worker died mid-episode: {ref}", worker_lost=True)
        try:
            if ref is None:
                raise WorkerLost("the worker was lost before the step was sent")
            result: StepResult = self._get(ref)
        except RayTaskError as exc:
            return _failed_step(f"{self.pool.env} step raised on its worker: {exc.cause!r}")
        except WorkerLost as lost:
            recovered = self._recover_and_step(action, str(lost))
            if recovered is None or isinstance(recovered, str):
                self._episode_open = False
                return _failed_step(recovered or f"the env worker died mid-episode ({lost})", worker_lost=True)
            result = recovered
        self._actions.append(action)
        if self.restarts:
            result.info.setdefault("worker_restarts", self.restarts)
        return result

    def _recover_and_step(self, action: str, why: str) -> StepResult | str | None:
        """Replace the worker; replay the episode and redo the step (a StepResult), or give the reason
        it could not be restored (a string; ``None`` when recovery is 'fail')."""
        replay = self.pool.recovery == "replay" and self._episode_open
        try:
            self._rebind()  # even without replay, the next reset starts on a healthy worker
        except (WorkerLost, EnvWorkerError) as exc:
            return f"the env worker died mid-episode ({why}) and could not be replaced: {exc}"
        if not replay:
            return None
        try:
            self._replay()
            return self._get(self._handle.step.remote(self.slot, action))  # type: ignore[no-any-return]
        except (WorkerLost, EnvWorkerError, RayTaskError) as exc:
            if isinstance(exc, WorkerLost):  # hung or dead again: do not leave the next call waiting on it
                with contextlib.suppress(WorkerLost, EnvWorkerError):
                    self._handle, self._generation = self.pool.replace(self.index, self._generation)
                    self._create(self._handle)
            return f"the env worker died mid-episode ({why}) and the episode could not be restored: {exc}"

    def step(self, action: str) -> StepResult:
        return self.finish_step(action, self.submit_step(action))

    def oracle_response(self) -> str | None:
        try:
            self._ensure_current()
            return self._get(self._handle.oracle.remote(self.slot))  # type: ignore[no-any-return]
        except (WorkerLost, EnvWorkerError, RayTaskError):
            return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # the worker may already be gone: nothing left to free
            ray.get(self._handle.close.remote(self.slot), timeout=min(5.0, self.pool.call_timeout_s))


class _OwnedRayEnv(RayEnv):
    """A RayEnv that owns a one-worker pool (what the registered ``ray`` env id makes)."""

    def close(self) -> None:
        super().close()
        self.pool.close()


def make_ray_env(env: str, config: dict[str, Any] | None = None, recovery: Recovery = "replay",
                 call_timeout_s: float = 60.0, max_restarts: int = 3,
                 actor_options: dict[str, Any] | None = None) -> RayEnv:
    """The ``ray`` env id: one env in its own actor.  For many envs share a :class:`RayEnvPool`."""
    pool = RayEnvPool(env, config, num_workers=1, recovery=recovery, call_timeout_s=call_timeout_s,
                      max_restarts=max_restarts, actor_options=actor_options)
    try:
        return _OwnedRayEnv(pool, 0, pool.config)
    except BaseException:
        pool.close()
        raise


make_ray_env.config_class = RayEnvConfig  # type: ignore[attr-defined]  # read by vista_rl.config_fields.config_class_of
