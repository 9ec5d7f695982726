"""Tools in Ray actors: the weights load once per actor, every rollout worker calls the actors.

- Actors are threaded (``max_concurrency``), so concurrent calls reach the tool together and a
  batching tool (the detector, a VLM-as-tool) answers them in one forward pass.
- A worker that dies (killed, OOM, lost node) or hangs past ``call_timeout_s`` is killed and
  replaced; the call that was on it comes back to the model as an error result ("call again"),
  not an exception, and the next call runs on the fresh actor.  A per-slot generation makes
  concurrent detections of one death replace it once.
- ``name`` makes the actors named (``namespace`` ``vista-tools``), so other driver processes on the
  same cluster attach to the same actors instead of loading their own copy.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError, RayTaskError

import vista_rl
from vista_rl import Tool, ToolContext, ToolResult

NAMESPACE = "vista-tools"


class ToolActor:
    """Holds one tool (made from its registered id and config) inside a Ray worker process."""

    def __init__(self, tool_id: str, config: dict[str, Any]) -> None:
        self.tool: Tool = vista_rl.make_tool(tool_id, **config)

    def schema(self) -> dict[str, Any]:
        return self.tool.openai_schema()

    def call(self, arguments: Any, images: list[Any], metadata: dict[str, Any]) -> ToolResult:
        return self.tool(arguments, ToolContext(images=list(images), metadata=dict(metadata)))

    def pid(self) -> int:
        return os.getpid()


class RayToolTransport:
    """``replicas`` actors of one tool, called round-robin."""

    def __init__(self, tool: str, config: dict[str, Any] | None = None, *, replicas: int = 1,
                 max_concurrency: int = 16, call_timeout_s: float = 120.0, start_timeout_s: float = 300.0,
                 actor_options: dict[str, Any] | None = None, name: str | None = None) -> None:
        if replicas < 1:
            raise ValueError("a Ray tool service needs at least one replica")
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        self.tool_id = tool
        self.config = dict(config or {})
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.name = name
        self._options = {"max_concurrency": max_concurrency, **(actor_options or {})}
        self._actor = ray.remote(max_restarts=0, max_task_retries=0)(ToolActor)
        self._lock = threading.Lock()
        self._workers = [self._spawn(index) for index in range(replicas)]
        self._generations = [0] * replicas
        self._next = itertools.count()
        self.replacements = 0
        self._closed = False
        try:
            self._schema: dict[str, Any] = ray.get(self._workers[0].schema.remote(), timeout=start_timeout_s)
        except RayTaskError as exc:
            self.close()
            raise vista_rl.VistaError(f"could not make tool {tool!r} in a Ray actor: {exc.cause!r}") from None

    def _spawn(self, index: int) -> Any:
        options = dict(self._options)
        if self.name:
            options.update(name=f"{self.name}-{index}", namespace=NAMESPACE, get_if_exists=True)
        return self._actor.options(**options).remote(self.tool_id, self.config)

    def worker(self, index: int) -> tuple[Any, int]:
        with self._lock:
            return self._workers[index], self._generations[index]

    def replace(self, index: int, generation: int) -> None:
        """Kill and respawn slot ``index`` unless someone already did (its generation moved on)."""
        with self._lock:
            if self._closed or self._generations[index] != generation:
                return
            ray.kill(self._workers[index], no_restart=True)
            self._workers[index] = self._spawn(index)
            self._generations[index] += 1
            self.replacements += 1

    def worker_pid(self, index: int = 0) -> int:
        handle, _ = self.worker(index)
        return int(ray.get(handle.pid.remote(), timeout=self.start_timeout_s))

    # ----------------------------------------------------------------- transport
    def schema(self) -> dict[str, Any]:
        return self._schema

    def call(self, arguments: Any, context: ToolContext) -> ToolResult:
        index = next(self._next) % len(self._workers)
        handle, generation = self.worker(index)
        timeout = self.call_timeout_s if generation == 0 else max(self.call_timeout_s, self.start_timeout_s)
        try:
            return ray.get(handle.call.remote(arguments, context.images, context.metadata), timeout=timeout)  # type: ignore[no-any-return]
        except GetTimeoutError:
            self.replace(index, generation)
            return ToolResult(text=f"Error: {self.tool_id} did not answer within {timeout:g}s; its worker was "
                                   "restarted. Call the tool again or go on without it.", error=True,
                              metadata={"worker_lost": True, "timeout": True})
        except RayTaskError as exc:  # the tool raised past Tool.__call__'s guard (e.g. an unpicklable result)
            return ToolResult(text=f"Error: {self.tool_id} failed in its worker: {exc.cause!r}", error=True)
        except (RayActorError, RayError) as exc:
            self.replace(index, generation)
            return ToolResult(text=f"Error: the {self.tool_id} worker died during this call ({type(exc).__name__}); "
                                   "it has been replaced. Call the tool again.", error=True,
                              metadata={"worker_lost": True})

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
        if not ray.is_initialized():  # the cluster is gone, and its actors with it
            return
        for handle in workers:
            with contextlib.suppress(Exception):  # already dead
                ray.kill(handle, no_restart=True)
