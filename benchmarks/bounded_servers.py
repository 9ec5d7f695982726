"""Issue 22 items 8 and 9 at their real sizes, against real servers on 127.0.0.1; prints JSON.

``vista serve`` (a tiny random Qwen2.5-VL, as a child process so its memory can be read):

- a 60 MB JSON body of tiny values, and a 60 MB body of one long string: status, and the slowest
  ``/health`` answer while each is in flight (was: 56 s stall, 2.7 GB peak);
- 32 ``image_url`` parts, each a blank 4096x4096 PNG: status, the server's peak RSS growth and its
  RSS after the request (was: 8-10 GB, 6.7 GB kept);
- 300 stop strings of 300 characters: status, time, and a concurrent request's time (was: 7.8 s);
- ``temperature`` 1e308 and Infinity: status (was: 200).

The tool server (``mark``): a 115-byte raw-image header claiming 16000x16000 RGBA (was: 400 with
976 MB peak growth) and a small PNG that decodes to 12000x12000 (was: ``/health`` stalled 1.2 s).

Usage: ``python benchmarks/bounded_servers.py``.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import msgpack
from PIL import Image


def _status_mb(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return -1.0


def _while_polling_health(url: str, action: Callable[[], httpx.Response]) -> dict[str, Any]:
    """Run ``action`` while another thread polls ``url/health``; the slowest answer in ms."""
    slowest = [0.0]
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            started = time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{url}/health", timeout=120)
            slowest[0] = max(slowest[0], time.perf_counter() - started)
            time.sleep(0.02)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    started = time.perf_counter()
    try:
        response = action()
        outcome: Any = response.status_code
        message = response.text[:160]
    except httpx.HTTPError as exc:
        outcome, message = type(exc).__name__, str(exc)[:160]
    seconds = time.perf_counter() - started
    done.set()
    poller.join()
    return {"status": outcome, "seconds": round(seconds, 2), "health_slowest_ms": round(slowest[0] * 1000, 1),
            "message": message}


def _png_data_url(size: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (size, size), "white").save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def bench_serve() -> dict[str, Any]:
    from vista_plugin_transformers.server import free_port, wait_for_health

    from vista_rl_sdk.tiny_models import cached_tiny_model

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkdtemp()) / "serve.log"
    with log.open("wb") as handle:
        process = subprocess.Popen([sys.executable, "-c", "from vista_rl.cli.main import main; main()", "serve",
                                    str(cached_tiny_model()),
                                    "--port", str(port), "--device", "cpu"], stdout=handle, stderr=handle)
    report: dict[str, Any] = {}
    try:
        wait_for_health(url, process, log_path=log)
        chat = f"{url}/v1/chat/completions"
        headers = {"content-type": "application/json"}
        report["rss_idle_mb"] = _status_mb(process.pid, "VmRSS")
        def post_body(body: bytes) -> Callable[[], httpx.Response]:
            return lambda: httpx.post(chat, content=body, headers=headers, timeout=600)

        report["body_60mb_tiny_values"] = _while_polling_health(url, post_body(
            b'{"messages": [{"role": "user", "content": "hi"}], "x": [' + b"0," * (30 * 1024 * 1024 - 1) + b"0]}"))
        report["body_60mb_one_string"] = _while_polling_health(url, post_body(json.dumps(
            {"messages": [{"role": "user", "content": "a" * (60 * 1024 * 1024)}], "max_tokens": 1}).encode()))
        before_peak = _status_mb(process.pid, "VmHWM")
        image = {"type": "image_url", "image_url": {"url": _png_data_url(4096)}}
        images = {"messages": [{"role": "user", "content": [image] * 32}], "max_tokens": 1}
        result = _while_polling_health(url, lambda: httpx.post(chat, json=images, timeout=600))
        time.sleep(0.5)  # the release runs after the response is sent
        result.update(peak_growth_mb=round(_status_mb(process.pid, "VmHWM") - before_peak, 1),
                      rss_after_mb=_status_mb(process.pid, "VmRSS"))
        report["images_32_of_4096"] = result
        two = {"messages": [{"role": "user", "content": [image] * 2}], "max_tokens": 1}
        result = _while_polling_health(url, lambda: httpx.post(chat, json=two, timeout=600))
        time.sleep(0.5)
        result.update(peak_rss_mb=_status_mb(process.pid, "VmHWM"), rss_after_mb=_status_mb(process.pid, "VmRSS"))
        report["images_2_of_4096_allowed"] = result
        stops = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stop": ["s" * 300] * 300}
        report["stop_300_of_300"] = _while_polling_health(url, lambda: httpx.post(chat, json=stops, timeout=600))
        for name, body in {"temperature_1e308": b"1e308", "temperature_Infinity": b"Infinity"}.items():
            raw = b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "temperature": ' + body + b"}"
            response = httpx.post(chat, content=raw, headers=headers, timeout=60)
            report[name] = {"status": response.status_code, "message": response.text[:160]}
    finally:
        process.terminate()
        process.wait(timeout=30)
    return report


def bench_tool_server() -> dict[str, Any]:
    from vista_plugin_envserver.codec import CONTENT_TYPE
    from vista_plugin_toolserve.http_client import LocalToolServer

    server = LocalToolServer("mark", {}, threads=2)
    report: dict[str, Any] = {}
    try:
        def call(images: list[dict[str, Any]]) -> httpx.Response:
            body = msgpack.packb({"tool": "mark", "arguments": {"points": [[1, 1]], "image": 0}, "images": images},
                                 use_bin_type=True)
            return httpx.post(f"{server.url}/call", content=body, headers={"content-type": CONTENT_TYPE}, timeout=120)

        assert server.pid is not None
        before = _status_mb(server.pid, "VmHWM")
        bomb = {"codec": "raw", "mode": "RGBA", "size": [16000, 16000], "data": b"\x00" * 64}
        result = _while_polling_health(server.url, lambda: call([bomb]))
        result.update(body_bytes=len(msgpack.packb({"tool": "mark", "images": [bomb]}, use_bin_type=True)),
                      peak_growth_mb=round(_status_mb(server.pid, "VmHWM") - before, 1))
        report["raw_header_16000x16000_rgba"] = result
        buffer = io.BytesIO()
        Image.new("L", (12000, 12000), 0).save(buffer, format="PNG", optimize=True)
        png = buffer.getvalue()
        result = _while_polling_health(server.url, lambda: call([{"codec": "png", "data": png}]))
        result.update(png_bytes=len(png), peak_growth_mb=round(_status_mb(server.pid, "VmHWM") - before, 1))
        report["png_12000x12000"] = result
    finally:
        server.close()
    return report


def main() -> int:
    report = {"tool_server": bench_tool_server(), "serve": bench_serve()}
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
