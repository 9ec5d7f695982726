"""What every benchmark under ``benchmarks/`` shares: interleaved timing, summaries, versions.

Why: a speed claim is only fair when both sides run under the same conditions.  On a shared
machine the load drifts, so one side run after the other can win by the clock alone; here the two
sides alternate (A B A B ...) in the same run, every sample is kept, and a summary gives the median
with the min-max.  An anchor that needs another Python (an old ``gym``, verl's or TRL's venv, a
VAGEN checkout) runs in a :class:`Worker` subprocess that times its own calls, so the pipe costs
nothing and the alternation still holds.  Not a benchmark itself (the leading underscore keeps it
out of ``tests/test_benchmarks_run.py``).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

#: larger than this machine's last-level cache (32 MiB); touched between calls for cold caches
COLD_BYTES = 64 * 1024 * 1024


def summarize(samples_s: Sequence[float]) -> dict[str, float]:
    """Median, min and max in milliseconds, and the sample count."""
    if not samples_s:
        return {"n": 0}
    ms = [s * 1e3 for s in samples_s]
    return {"median_ms": round(statistics.median(ms), 4), "min_ms": round(min(ms), 4),
            "max_ms": round(max(ms), 4), "n": len(ms)}


def ratio(anchor: dict[str, Any], ours: dict[str, Any]) -> float | None:
    """anchor median / our median (> 1: ours is faster); None when either side has no samples."""
    if not anchor.get("n") or not ours.get("n") or not ours["median_ms"]:
        return None
    return round(anchor["median_ms"] / ours["median_ms"], 2)


def timed(fn: Callable[[int], Any], n: int, start: int = 0, before: Callable[[], Any] | None = None) -> list[float]:
    """Wall time of ``fn(start)``, ..., ``fn(start + n - 1)``; ``before`` runs untimed before each call."""
    out = []
    for i in range(start, start + n):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn(i)
        out.append(time.perf_counter() - t0)
    return out


def interleave(ours: Callable[[int, int], list[float]], anchor: Callable[[int, int], list[float]],
               rounds: int, per_round: int) -> tuple[list[float], list[float]]:
    """Alternate chunks of ``per_round`` timed calls: ours, anchor, ours, anchor, ...

    Each side is ``f(start, n) -> seconds per call``; ``start`` advances so seeds stay distinct.
    The side that goes first swaps every round, so neither always runs right after the other.
    """
    a: list[float] = []
    b: list[float] = []
    for r in range(rounds):
        start = r * per_round
        if r % 2 == 0:
            a += ours(start, per_round)
            b += anchor(start, per_round)
        else:
            b += anchor(start, per_round)
            a += ours(start, per_round)
    return a, b


class ColdCache:
    """Evicts the CPU caches by writing a buffer larger than the last-level cache."""

    def __init__(self, nbytes: int = COLD_BYTES) -> None:
        self._buf = bytearray(nbytes)
        self._tick = 0

    def __call__(self) -> None:
        self._tick = (self._tick + 1) % 251
        # a slice assignment writes every byte (memset speed), so every cache line is replaced
        self._buf[:] = bytes([self._tick]) * len(self._buf)


def dist_versions(*names: str) -> dict[str, str | None]:
    """Installed versions of distributions (None when not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def machine(note: str | None = None) -> dict[str, Any]:
    """Where and when the numbers were taken, and how busy the machine was (1-minute load)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = os.cpu_count() or 1
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    quiet = None if load is None else load < 0.5 * cores
    return {"date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"), "cpu": cpu, "cores": cores,
            "python": platform.python_version(), "load_1min": None if load is None else round(load, 2),
            "quiet": quiet, "note": note or os.environ.get("VISTA_BENCH_NOTE")}


class Worker:
    """A benchmark half in another Python, driven over JSON lines on stdin/stdout.

    The child runs ``script`` (Python source) that reads one JSON request per line and answers one
    JSON line, timing its own calls (the pipe is not in the figures).  ``setup`` is the child's
    first answer (versions, or an error).
    """

    def __init__(self, python: str | Path, script: str, args: Sequence[str] = (),
                 env: dict[str, str] | None = None) -> None:
        self._proc = subprocess.Popen([str(python), "-c", script, *args], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})})
        self.setup = self._read()

    def _read(self) -> dict[str, Any]:
        assert self._proc.stdout is not None
        while True:
            line = self._proc.stdout.readline()
            if not line:
                err = self._proc.stderr.read() if self._proc.stderr else ""
                return {"error": f"worker exited ({self._proc.wait()}): {err[-600:]}"}
            if line.startswith("{"):
                return json.loads(line)

    def call(self, **request: Any) -> dict[str, Any]:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.call(op="quit")
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()


WORKER_LOOP = r'''
import json, sys, time
def serve(ops):
    """ops: name -> f(i, arg); answers {"times": [...]} for n calls from start."""
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        try:
            fn = ops[req["op"]]
            before = ops.get("_before") if req.get("cold") else None
            times = []
            for i in range(req.get("start", 0), req.get("start", 0) + req.get("n", 1)):
                if before is not None:
                    before(i, None)
                t0 = time.perf_counter()
                fn(i, req.get("arg"))
                times.append(time.perf_counter() - t0)
            print(json.dumps({"times": times}), flush=True)
        except Exception as exc:  # one bad request is reported, the worker keeps serving
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
'''


def stamp(report: dict[str, Any], anchor: str, ours: Sequence[str],
          anchor_versions: dict[str, Any] | None = None) -> dict[str, Any]:
    """``report`` with what every benchmark's JSON carries: the machine (date, load, quiet), the
    anchor it compared against (or ``none: why``) and the versions of both sides."""
    out = dict(report)
    out["machine"] = {**(report.get("machine") or {}), **machine()}
    out["anchor"] = anchor
    out["versions"] = {"ours": dist_versions("vista-rl", *ours), "anchor": anchor_versions}
    return out
