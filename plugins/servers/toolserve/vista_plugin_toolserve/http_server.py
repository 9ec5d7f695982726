"""An HTTP server that hosts tools: ``POST /call`` (msgpack), ``GET /tools``, ``GET /health``.

Each tool is made once when the server starts (its weights load once) and serves every client.
Calls run on a thread pool of ``threads`` workers, so concurrent calls reach a batching tool
together.  ``vista tool-server`` and :class:`~vista_plugin_toolserve.http_client.LocalToolServer`
start it; ``--parent-pid`` makes it exit when the process that started it is gone, so a managed
server never outlives its rollout.

A call's body is bounded as it streams in (``max_body_bytes``, 413), then unpacked and its images
decoded on worker threads (never on the event loop: a 0.4 MB PNG that decodes to 12000x12000 held
``/health`` for 1.2 s), within ``max_values`` msgpack values and the image limits of
:class:`vista_rl.limits.ImageLimits` (sizes checked from headers before decoding, 400 past them).
After a large call the server collects garbage and trims the heap.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import msgpack
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from vista_plugin_envserver.codec import CONTENT_TYPE, CodecError

import vista_rl
from vista_plugin_toolserve.wire import MAX_VALUES, decode_call, encode_result, unpack_call
from vista_rl import Tool, ToolContext
from vista_rl.limits import ImageLimits, limit_decompression, release_memory
from vista_rl.serving import BearerAuth, BodyTooLarge, read_limited_body

DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
LARGE_CALL_BYTES = 1024 * 1024


def create_tool_app(tools: Mapping[str, Tool], *, token: str | None = None, threads: int = 16,
                    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, image_limits: ImageLimits | None = None,
                    max_values: int = MAX_VALUES, decode_threads: int = 4) -> Any:
    """The ASGI app serving ``tools`` (registered id -> tool instance)."""
    import anyio

    limiter = anyio.CapacityLimiter(threads)
    decoder = anyio.CapacityLimiter(decode_threads)
    image_limits = image_limits or ImageLimits()
    hosted = dict(tools)

    def decode(body: bytes) -> tuple[str, Any, ToolContext]:
        return decode_call(unpack_call(body, max_values), image_limits)

    def encode(result: Any) -> bytes:
        return msgpack.packb(encode_result(result), use_bin_type=True)  # type: ignore[no-any-return]

    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "pid": os.getpid(), "tools": sorted(hosted)})

    async def listing(_request: Request) -> JSONResponse:
        return JSONResponse({"tools": {tool_id: tool.openai_schema() for tool_id, tool in hosted.items()}})

    async def call(request: Request) -> Response:
        try:
            body = await read_limited_body(request.stream(), request.headers.get("content-length"), max_body_bytes)
        except BodyTooLarge as exc:
            return JSONResponse({"error": str(exc)}, status_code=413)
        large = len(body) >= LARGE_CALL_BYTES
        release = BackgroundTask(release_memory) if large else None
        try:
            tool_id, arguments, context = await anyio.to_thread.run_sync(decode, body, limiter=decoder)
        except (CodecError, ValueError, msgpack.UnpackException) as exc:
            return JSONResponse({"error": f"bad call: {exc}"}, status_code=400, background=release)
        del body
        tool = hosted.get(tool_id)
        if tool is None:
            return JSONResponse({"error": f"tool {tool_id!r} is not hosted here; hosted: {sorted(hosted)}"},
                                status_code=404, background=release)
        if context.images and release is None:
            release = BackgroundTask(release_memory)
        result = await anyio.to_thread.run_sync(tool, arguments, context, limiter=limiter)
        del arguments, context
        packed = await anyio.to_thread.run_sync(encode, result, limiter=decoder)
        return Response(packed, media_type=CONTENT_TYPE, background=release)

    app: Any = Starlette(routes=[Route("/health", health), Route("/tools", listing),
                                 Route("/call", call, methods=["POST"])])
    if token:
        app = BearerAuth(app, token)
    return app


def watch_parent(parent_pid: int) -> None:
    """Exit this process when ``parent_pid`` is gone (re-parented), checked every half second."""
    def loop() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent_pid:
                os._exit(0)

    threading.Thread(target=loop, name="vista-parent-watch", daemon=True).start()


def serve(tool_specs: Mapping[str, dict[str, Any]], host: str = "127.0.0.1", port: int = 8790,
          token: str | None = None, threads: int = 16, log_level: str = "warning", *,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, image_limits: ImageLimits | None = None) -> None:
    """Make each tool (id -> config) and serve them until interrupted."""
    import uvicorn

    image_limits = image_limits or ImageLimits()
    limit_decompression(image_limits.max_image_pixels)  # PIL's own bomb check, behind the header checks
    tools = {tool_id: vista_rl.make_tool(tool_id, **config) for tool_id, config in tool_specs.items()}
    app = create_tool_app(tools, token=token, threads=threads, max_body_bytes=max_body_bytes, image_limits=image_limits)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False)


def main(argv: list[str] | None = None) -> None:
    """``python -m vista_plugin_toolserve.http_server --tool ID --config JSON ...`` (what
    :class:`LocalToolServer` runs)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--tool", action="append", required=True)
    parser.add_argument("--config", action="append", default=[], help="JSON config, one per --tool, in order")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--parent-pid", type=int, default=None)
    args = parser.parse_args(argv)
    if args.parent_pid:
        watch_parent(args.parent_pid)
    configs = [json.loads(text) for text in args.config] + [{}] * (len(args.tool) - len(args.config))
    serve(dict(zip(args.tool, configs, strict=True)), args.host, args.port, os.environ.get("VISTA_TOOL_TOKEN"),
          args.threads)


if __name__ == "__main__":
    main()
