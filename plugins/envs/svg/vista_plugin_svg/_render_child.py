"""Child side of the SVG renderer (:mod:`vista_plugin_svg.render`): SVG in, PNG out.

Runs as its own interpreter that caps itself first (address space, output size, CPU), so
a document that makes cairo loop or allocate is killed without touching the trainer.  Network and
file access through the renderer are refused by a URL fetcher that fetches nothing.

Two modes:

* ``once``: one JSON request on stdin; PNG bytes on stdout and exit 0, or a one-line
  reason on stderr and exit 2;
* ``serve``: a loop over framed requests (4-byte big-endian length + JSON) on stdin, answering
  each with a status byte (``0`` PNG, ``1`` error text, ``2`` error text then exit) + 4-byte length +
  payload on stdout.  Before each request the CPU-time soft limit is moved to "used so far +
  ``cpu_s``", so the cap is per render; SIGXCPU kills the worker and the parent starts a new one.
  The loop ends at end of input, so the worker never outlives its parent's pipe.
"""

import json
import resource
import struct
import sys


def _refuse(url, resource_type=None):  # noqa: ANN001 - cairosvg's fetcher signature
    raise ValueError(f"external resource refused: {str(url)[:80]}")


def render(request):  # noqa: ANN001, ANN201 - a tiny stdlib-only script
    """``(status, payload)``: 0 and PNG bytes, 1 and a reason, or 2 and a reason (worker must exit)."""
    try:
        from cairosvg.surface import PNGSurface  # noqa: PLC0415 - only the child pays for cairo

        png = PNGSurface.convert(
            bytestring=request["svg"].encode("utf-8"), output_width=request["width"],
            output_height=request["height"], background_color=request.get("background") or None,
            url_fetcher=_refuse, unsafe=False)
    except RecursionError:
        return 1, b"the SVG is nested too deeply to render"
    except MemoryError:
        return 2, b"rendering the SVG needed more memory than allowed"
    except Exception as exc:  # noqa: BLE001 - any renderer error is a message for the model
        text = f"{type(exc).__name__}: {str(exc)[:200]}".replace("\n", " ").strip()
        return (2 if "memory" in text.lower() else 1), text.encode("utf-8", errors="replace")
    return 0, png


def _read_exact(stream, size):  # noqa: ANN001, ANN202
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def serve(cpu_s):  # noqa: ANN001, ANN201
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = _read_exact(stdin, 4)
        if header is None:
            return 0
        body = _read_exact(stdin, struct.unpack(">I", header)[0])
        if body is None:
            return 0
        usage = resource.getrusage(resource.RUSAGE_SELF)
        used = int(usage.ru_utime + usage.ru_stime) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (used + cpu_s, resource.RLIM_INFINITY))
        status, payload = render(json.loads(body.decode("utf-8")))
        stdout.write(struct.pack(">BI", status, len(payload)) + payload)
        stdout.flush()
        if status == 2:
            return 0


def apply_limits(memory_mb, cpu_s, output_mb, per_request):  # noqa: ANN001, ANN201
    """Cap this process before anything else runs in it (the parent passes the numbers).

    Done here rather than in a ``preexec_fn``: that hook runs between fork and exec, which is unsafe
    when the parent has threads (the rollout engine steps envs from a thread pool).  The child is
    our own script, so capping itself first is as strong: the SVG it renders cannot run code."""
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, resource.RLIM_INFINITY if per_request else cpu_s + 1))
    output = output_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (output, output))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main():  # noqa: ANN201
    # argv: MODE MEMORY_MB CPU_S OUTPUT_MB, MODE being "serve" or "once"
    mode, memory_mb, cpu_s, output_mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    apply_limits(memory_mb, cpu_s, output_mb, per_request=mode == "serve")
    if mode == "serve":
        return serve(cpu_s)
    status, payload = render(json.loads(sys.stdin.buffer.read().decode("utf-8")))
    if status == 0:
        sys.stdout.buffer.write(payload)
        return 0
    sys.stderr.write(payload.decode("utf-8", errors="replace") + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
