"""Child side of :func:`vista_plugin_svg.render.render_svg`: one SVG in (JSON on stdin), PNG out.

Runs as its own interpreter under the rlimits the parent set (address space, CPU seconds, output
size), so a document that makes cairo loop or allocate is killed without touching the trainer.
Network and file access through the renderer are refused by a URL fetcher that fetches nothing.
Exit codes: 0 with PNG bytes on stdout; 2 with a one-line reason on stderr.
"""

import json
import sys


def _refuse(url, resource_type=None):  # noqa: ANN001 - cairosvg's fetcher signature
    raise ValueError(f"external resource refused: {str(url)[:80]}")


def main() -> int:
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    try:
        from cairosvg.surface import PNGSurface  # noqa: PLC0415 - only the child pays for cairo

        png = PNGSurface.convert(
            bytestring=request["svg"].encode("utf-8"), output_width=request["width"],
            output_height=request["height"], background_color=request.get("background") or None,
            url_fetcher=_refuse, unsafe=False)
    except RecursionError:
        sys.stderr.write("the SVG is nested too deeply to render\n")
        return 2
    except MemoryError:
        sys.stderr.write("rendering the SVG needed more memory than allowed\n")
        return 2
    except Exception as exc:  # noqa: BLE001 - any renderer error is a message for the model
        sys.stderr.write(f"{type(exc).__name__}: {str(exc)[:200]}\n".replace("\n", " ").strip() + "\n")
        return 2
    sys.stdout.buffer.write(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
