"""The ``python`` tool: the model writes code, a sandbox runs it (see :mod:`vista_plugin_tools.sandbox`).

The episode's images are saved into the working directory as ``image_0.png``, ``image_1.png``, ...
so code can measure pixels; any image the code saves (e.g. ``plt.savefig("plot.png")``) comes back
as a new image.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from vista_plugin_tools.base import ImageTool, as_rgb
from vista_plugin_tools.sandbox import SandboxLimits, run_python
from vista_rl import ToolContext, ToolResult


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters cut)"


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
                 isolate_network: bool = True) -> None:
        self.limits = SandboxLimits(cpu_seconds=cpu_seconds, wall_seconds=wall_seconds, memory_mb=memory_mb,
                                    output_bytes=output_bytes)
        self.max_chars = max_chars
        self.share_images = share_images
        self.isolate_network = isolate_network

    def apply(self, arguments: Arguments, context: ToolContext) -> ToolResult:
        inputs = {f"image_{i}.png": as_rgb(image) for i, image in enumerate(context.images)} if self.share_images else {}
        result = run_python(arguments.code, self.limits, inputs, isolate_network=self.isolate_network)
        if result.timed_out:
            status = f"Stopped: the code ran longer than {self.limits.wall_seconds:g} s (wall time)."
        elif result.cpu_limited:
            status = f"Stopped: the code used more than {self.limits.cpu_seconds} s of CPU time."
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
                      "seconds": round(result.seconds, 3), "stdout_truncated": result.stdout_truncated},
        )
