"""The ``python`` tool: the model writes code, a sandbox runs it (see :mod:`vista_plugin_tools.sandbox`).

The episode's images are saved into the working directory as ``image_0.png``, ``image_1.png``, ...
so code can measure pixels; any image the code saves (e.g. ``plt.savefig("plot.png")``) comes back
as a new image.

Config ``isolation``: ``"namespaces"`` (default) runs the code under bubblewrap (namespaces, nobody
user, seccomp; see :mod:`vista_plugin_tools.isolation`).  Where the host cannot give that, every call
is refused with an error result saying why (and a warning is logged when the tool is made), so a run
never silently trains against a weaker sandbox.  Memory is bounded per run, not per process
(:mod:`vista_plugin_tools.memory_cap`): a cgroup v2 ``memory.max`` where the host delegates one,
else a run may not create processes and RLIMIT_AS bounds its one process; which applies is logged
when the tool is made and returned in every result's ``metadata["memory_cap"]``.  ``"process"`` is the explicit opt-in to the weaker
process-only sandbox, whose Python-level audit hook native code can bypass.
"""

from __future__ import annotations

import logging
import signal

from pydantic import BaseModel, ConfigDict, Field

from vista_plugin_tools import isolation as os_isolation
from vista_plugin_tools import memory_cap
from vista_plugin_tools.base import ImageTool, as_rgb
from vista_plugin_tools.sandbox import ISOLATION_MODES, SandboxLimits, run_python
from vista_rl import ConfigError, ToolContext, ToolResult

logger = logging.getLogger(__name__)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters cut)"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class PythonTool(ImageTool):
    name = "python"
    description = ("Run Python 3 code in a sandbox (no network, no files outside its folder, time and "
                   "memory limits). numpy, PIL and matplotlib are available. Earlier images are in "
                   "the folder as image_0.png, image_1.png, ...; images you save are returned. "
                   "Print what you want to see.")

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        code: str = Field(min_length=1, max_length=20_000, description="Python source to run")

    def __init__(self, cpu_seconds: int = 10, wall_seconds: float = 20.0, memory_mb: int = 1024,
                 output_bytes: int = 1_000_000, max_chars: int = 4000, share_images: bool = True,
                 isolate_network: bool = True, isolation: str = "namespaces", bwrap_path: str = "bwrap",
                 disk_mb: int = 64) -> None:
        if isolation not in ISOLATION_MODES:
            raise ConfigError(f"python tool: isolation must be one of {', '.join(ISOLATION_MODES)}, not {isolation!r}")
        self.isolation = isolation
        self.bwrap_path = bwrap_path
        if isolation == "namespaces" and (why := os_isolation.problem(bwrap_path)) is not None:
            logger.warning("python tool: every call will be refused: %s", why)
        self.limits = SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=wall_seconds, memory_mb=memory_mb,
                                    output_bytes=output_bytes, disk_mb=disk_mb)
        self.memory_cap = memory_cap.detect()
        logger.info("python tool: the memory of each run is capped by %s",
                    self.memory_cap.describe(memory_mb, disk_mb))
        self.max_chars = max_chars
        self.share_images = share_images
        self.isolate_network = isolate_network

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        inputs = {f"image_{i}.png": as_rgb(image) for i, image in enumerate(context.images)} if self.share_images else {}
        try:
            result = run_python(arguments.code, self.limits, inputs, isolate_network=self.isolate_network,
                                isolation_mode=self.isolation, bwrap=self.bwrap_path)
        except os_isolation.IsolationUnavailable as exc:
            return ToolResult(text=f"Error: python: the sandbox is unavailable, so the code was not run: {exc}",
                              error=True, metadata={"refused": str(exc), "isolation": self.isolation})
        if result.failed_to_start:
            detail = result.stderr.strip()[-self.max_chars:] or f"exit code {result.exit_code}"
            return ToolResult(text=f"Error: python: the sandbox failed to start, so the code did not run: {detail}",
                              error=True, metadata={"refused": detail, "isolation": self.isolation})
        if result.timed_out:
            status = f"Stopped: the code ran longer than {self.limits.wall_seconds:g} s (wall time)."
        elif result.cpu_limited:
            status = f"Stopped: the code used more than {self.limits.cpu_seconds} s of CPU time."
        elif result.exit_code is not None and result.exit_code < 0:
            status = f"Stopped: the process was killed by {_signal_name(-result.exit_code)} (a sandbox limit or a crash)."
        else:
            status = f"Exit code {result.exit_code}."
        parts = [status]
        if result.stdout:
            cut = " (output limit reached)" if result.stdout_truncated else ""
            parts.append(f"stdout{cut}:\n{_clip(result.stdout, self.max_chars)}")
        if result.stderr:
            cut = " (output limit reached)" if result.stderr_truncated else ""
            parts.append(f"stderr{cut}:\n{_clip(result.stderr, self.max_chars)}")
        if not result.stdout and not result.stderr:
            parts.append("(no output; use print() to show values)")
        first_new = len(context.images)
        if result.images:
            numbered = ", ".join(f"{name} -> image {first_new + i}" for i, name in enumerate(result.image_names))
            parts.append(f"Saved image(s): {numbered}.")
        return ToolResult(
            text="\n".join(parts), images=result.images, error=not result.ok,
            metadata={"exit_code": result.exit_code, "timed_out": result.timed_out, "layers": result.layers,
                      "isolation": self.isolation, "memory_cap": result.memory_cap,
                      "peak_memory_bytes": result.peak_memory_bytes, "oom_killed": result.oom_killed,
                      "seconds": round(result.seconds, 3), "stdout_truncated": result.stdout_truncated},
        )
