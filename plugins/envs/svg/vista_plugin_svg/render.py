"""Render SVG to a PIL image in a resource-capped child process.

Why a child process and not cairosvg in-process: cairo is native code, so a pathological document
(a pattern with a microscopic tile, a path with millions of segments, a huge blur) can spin or
allocate inside C where no Python timeout reaches.  The child gets an address-space cap, a CPU-time
cap, an output-size cap and a wall-clock timeout; when any trips, the parent kills it and returns a
:class:`RenderResult` whose ``error`` says which limit, never an exception.  The static checks in
:mod:`.safety` run first, so known attacks are refused with a precise reason before a process starts.

The same pattern as the python tool's process sandbox (plugins/tools/tools), cut down to what a renderer
needs: no namespaces (the child runs no model code, only cairo on a checked document).
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import select
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from vista_plugin_svg.safety import SvgLimits, UnsafeSvg, check_svg

CHILD = Path(__file__).with_name("_render_child.py")


@dataclass(frozen=True)
class RenderLimits:
    """Caps on the renderer process."""

    timeout_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 768
    output_mb: int = 32


@dataclass
class RenderResult:
    """A rendered image, or the reason there is none (meant for the model)."""

    image: Image.Image | None
    error: str | None = None
    stage: str = "ok"  # ok | refused | render | limit

    @property
    def ok(self) -> bool:
        return self.image is not None


def _child_command(mode: str, limits: RenderLimits) -> list[str]:
    """The child interpreter and its caps (it applies them to itself before importing cairo)."""
    return [sys.executable, "-I", str(CHILD), mode, str(limits.memory_mb), str(limits.cpu_s), str(limits.output_mb)]


def _child_env() -> dict[str, str]:
    """A minimal environment: no proxies, no credentials, nothing the renderer could leak."""
    keep = ("PATH", "LANG", "LC_ALL", "HOME", "VIRTUAL_ENV", "SYSTEMROOT", "LD_LIBRARY_PATH")
    return {key: os.environ[key] for key in keep if key in os.environ}


def render_unchecked(svg: str, width: int, height: int, background: str | None = "white",
                     limits: RenderLimits | None = None) -> RenderResult:
    """Render ``svg`` at ``width`` x ``height`` in a capped child process, skipping the static checks.

    Use :func:`render_svg` for model output; this is for documents that were already checked."""
    limits = limits or RenderLimits()
    request = json.dumps({"svg": svg, "width": int(width), "height": int(height), "background": background})
    try:
        done = subprocess.run(  # noqa: S603 - fixed interpreter and script, data on stdin
            _child_command("once", limits), input=request.encode("utf-8"), capture_output=True,
            timeout=limits.timeout_s, env=_child_env(), start_new_session=True, check=False)
    except subprocess.TimeoutExpired:
        return RenderResult(None, f"rendering took longer than {limits.timeout_s:g} s and was stopped", "limit")
    except OSError as exc:
        return RenderResult(None, f"the renderer could not start: {exc}", "render")
    if done.returncode == 0:
        try:
            image = Image.open(io.BytesIO(done.stdout))
            image.load()
        except Exception as exc:  # noqa: BLE001
            return RenderResult(None, f"the renderer returned no readable image ({type(exc).__name__})", "render")
        return RenderResult(image.convert("RGB"))
    reason = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    message = reason[-1][:300] if reason else ""
    if done.returncode < 0:  # killed by a signal: SIGXCPU, SIGKILL (memory), SIGXFSZ
        return RenderResult(None, f"rendering exceeded the renderer's CPU, memory or output limits "
                            f"(signal {-done.returncode})", "limit")
    if "MemoryError" in message or "memory" in message.lower():
        return RenderResult(None, "rendering the SVG needed more memory than allowed", "limit")
    return RenderResult(None, f"the SVG could not be rendered: {message or 'renderer failed'}", "render")


class RenderWorker:
    """A long-lived renderer child (``_render_child.py serve``) under the same caps.

    Why: starting Python and importing cairo costs about half a second; an RL step should not.  The
    worker keeps cairo loaded and renders one framed request at a time.  The caps hold per render:
    the address-space cap for the worker's life, the CPU cap moved forward by the worker before each
    request, the wall-clock timeout enforced here.  Whenever a render trips a cap, or the worker
    dies, it is killed and the next render starts a fresh one; after ``recycle_after`` renders it is
    replaced too, so slow leaks in native code cannot build up.  Not thread-safe: one per env.
    """

    def __init__(self, limits: RenderLimits | None = None, recycle_after: int = 500) -> None:
        self.limits = limits or RenderLimits()
        self.recycle_after = recycle_after
        self._process: subprocess.Popen[bytes] | None = None
        self._renders = 0
        self.starts = 0

    def _start(self) -> subprocess.Popen[bytes]:
        limits = self.limits
        process = subprocess.Popen(  # noqa: S603 - fixed interpreter and script
            _child_command("serve", limits), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, env=_child_env(), start_new_session=True)
        self._process, self._renders = process, 0
        self.starts += 1
        return process

    def close(self) -> None:
        """Stop the worker (safe to call twice)."""
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=1.0)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
        finally:
            if process.stdout is not None:
                process.stdout.close()

    def _kill(self) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        process.kill()
        code = process.wait()
        if process.stdout is not None:
            process.stdout.close()
        if process.stdin is not None:
            with contextlib.suppress(OSError):
                process.stdin.close()
        return code

    def _read(self, fd: int, size: int, deadline: float) -> bytes | None:
        """Exactly ``size`` bytes from ``fd`` before ``deadline``, or ``None`` (EOF or too late)."""
        data = bytearray()
        while len(data) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, size - len(data))
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def render(self, svg: str, width: int, height: int, background: str | None = "white") -> RenderResult:
        """Render with the worker (starting it if needed); never raises."""
        if self._process is not None and (self._process.poll() is not None or self._renders >= self.recycle_after):
            self.close()
        try:
            process = self._process or self._start()
        except OSError as exc:
            return RenderResult(None, f"the renderer could not start: {exc}", "render")
        assert process.stdin is not None and process.stdout is not None
        body = json.dumps({"svg": svg, "width": int(width), "height": int(height),
                           "background": background}).encode("utf-8")
        deadline = time.monotonic() + self.limits.timeout_s
        try:
            process.stdin.write(struct.pack(">I", len(body)) + body)
            process.stdin.flush()
        except OSError:
            code = self._kill()
            return RenderResult(None, f"the renderer stopped unexpectedly (exit {code})", "limit")
        fd = process.stdout.fileno()
        header = self._read(fd, 5, deadline)
        if header is None:
            timed_out = time.monotonic() >= deadline
            code = self._kill()
            if timed_out:
                return RenderResult(None, f"rendering took longer than {self.limits.timeout_s:g} s and was stopped",
                                    "limit")
            return RenderResult(None, "rendering exceeded the renderer's CPU, memory or output limits "
                                f"(exit {code})", "limit")
        status, size = struct.unpack(">BI", header)
        if size > self.limits.output_mb * 1024 * 1024:
            self._kill()
            return RenderResult(None, "the renderer's output was larger than allowed", "limit")
        payload = self._read(fd, size, deadline)
        if payload is None:
            self._kill()
            return RenderResult(None, f"rendering took longer than {self.limits.timeout_s:g} s and was stopped",
                                "limit")
        self._renders += 1
        if status == 0:
            try:
                image = Image.open(io.BytesIO(payload))
                image.load()
            except Exception as exc:  # noqa: BLE001
                return RenderResult(None, f"the renderer returned no readable image ({type(exc).__name__})",
                                    "render")
            return RenderResult(image.convert("RGB"))
        message = payload.decode("utf-8", errors="replace")
        if status == 2:
            self._kill()
            if "memory" in message.lower():
                return RenderResult(None, "rendering the SVG needed more memory than allowed", "limit")
        return RenderResult(None, f"the SVG could not be rendered: {message}", "render")

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self._kill()


class RenderPool:
    """Up to ``size`` :class:`RenderWorker` processes shared by every env of a process.

    Why: the rollout engine makes a fresh env per episode and closes it after a few turns, so a
    worker per env would pay the interpreter start again for every episode.  The pool keeps workers
    across episodes; a render borrows an idle one, starts one while fewer than ``size`` exist, or
    waits for one to come back.  Thread-safe (the rollout engine steps envs from a thread pool).
    """

    def __init__(self, limits: RenderLimits | None = None, size: int = 2) -> None:
        if size < 1:
            raise ValueError("a render pool needs at least one worker")
        self.limits = limits or RenderLimits()
        self.size = size
        self._idle: list[RenderWorker] = []
        self._workers: list[RenderWorker] = []
        self._ready = threading.Condition()

    @property
    def starts(self) -> int:
        """Worker processes started so far by the pool's live workers (restarts after a cap included)."""
        with self._ready:
            return sum(worker.starts for worker in self._workers)

    def render(self, svg: str, width: int, height: int, background: str | None = "white") -> RenderResult:
        with self._ready:
            while not self._idle and len(self._workers) >= self.size:
                self._ready.wait()
            if self._idle:
                worker = self._idle.pop()
            else:
                worker = RenderWorker(self.limits)
                self._workers.append(worker)
        try:
            return worker.render(svg, width, height, background)
        finally:
            with self._ready:
                self._idle.append(worker)
                self._ready.notify()

    def close(self) -> None:
        """Stop the idle workers (a busy one is stopped by the next close after it returns)."""
        with self._ready:
            idle, self._idle = self._idle, []
            self._workers = [worker for worker in self._workers if worker not in idle]
        for worker in idle:
            worker.close()


_POOLS: dict[tuple[int, RenderLimits, int], RenderPool] = {}  # a cache of processes, keyed by owner pid
_POOLS_LOCK = threading.Lock()


def shared_pool(limits: RenderLimits, size: int = 2) -> RenderPool:
    """The process-wide pool for ``limits`` and ``size``; a forked child (Ray, multiprocessing) gets
    its own, never its parent's pipes."""
    key = (os.getpid(), limits, size)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = RenderPool(limits, size)
        return pool


@atexit.register
def close_shared_pools() -> None:
    """Stop every shared worker of this process (also runs at interpreter exit)."""
    with _POOLS_LOCK:
        pools = [pool for (pid, _, _), pool in _POOLS.items() if pid == os.getpid()]
        _POOLS.clear()
    for pool in pools:
        pool.close()


def render_svg(svg: str, width: int, height: int, background: str | None = "white",
               svg_limits: SvgLimits | None = None, limits: RenderLimits | None = None,
               worker: RenderWorker | RenderPool | None = None) -> RenderResult:
    """Check ``svg`` (:func:`.safety.check_svg`) and render it (with ``worker`` if given, else in a
    one-shot child); never raises."""
    try:
        check_svg(svg, svg_limits)
    except UnsafeSvg as exc:
        return RenderResult(None, str(exc), "refused")
    if worker is not None:
        return worker.render(svg, width, height, background)
    return render_unchecked(svg, width, height, background, limits)
