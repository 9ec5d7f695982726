"""Render SVG to a PIL image in a resource-capped child process.

Why a child process and not cairosvg in-process: cairo is native code, so a pathological document
(a pattern with a microscopic tile, a path with millions of segments, a huge blur) can spin or
allocate inside C where no Python timeout reaches.  The child gets an address-space cap, a CPU-time
cap, an output-size cap and a wall-clock timeout; when any trips, the parent kills it and returns a
:class:`RenderResult` whose ``error`` says which limit, never an exception.  The static checks in
:mod:`.safety` run first, so known attacks are refused with a precise reason before a process starts.

The same pattern as the python tool's process sandbox (plugins/tools), cut down to what a renderer
needs: no namespaces (the child runs no model code, only cairo on a checked document).
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
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


def _limit_child(limits: RenderLimits) -> None:
    """Runs in the child between fork and exec: caps that cairo cannot walk past."""
    memory = limits.memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    output = limits.output_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setsid()


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
            [sys.executable, "-I", str(CHILD)], input=request.encode("utf-8"), capture_output=True,
            timeout=limits.timeout_s, env=_child_env(), preexec_fn=lambda: _limit_child(limits),  # noqa: PLW1509
            check=False)
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


def render_svg(svg: str, width: int, height: int, background: str | None = "white",
               svg_limits: SvgLimits | None = None, limits: RenderLimits | None = None) -> RenderResult:
    """Check ``svg`` (:func:`.safety.check_svg`) and render it; never raises."""
    try:
        check_svg(svg, svg_limits)
    except UnsafeSvg as exc:
        return RenderResult(None, str(exc), "refused")
    return render_unchecked(svg, width, height, background, limits)
