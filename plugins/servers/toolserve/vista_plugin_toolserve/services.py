"""Factories behind the routed tool ids ``ray/<tool id>`` and ``http/<tool id>``.

A served tool is made once per process for each distinct (tool, settings): every rollout engine,
env and episode in the process that asks for it gets the same proxy, hence the same actors or
server, hence one copy of the weights.  Across processes, Ray actors are shared by ``name`` and an
HTTP server by ``url``.  Everything made here is closed at interpreter exit (managed servers are
also tied to this process with ``--parent-pid``).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import threading
from typing import Any

from vista_plugin_toolserve.proxy import ServedTool, served_tool

_lock = threading.Lock()
_made: dict[str, ServedTool] = {}


def _key(kind: str, tool: str, settings: dict[str, Any]) -> str:
    return json.dumps([kind, tool, settings], sort_keys=True, default=str)


def ray_tool(tool: str, config: dict[str, Any] | None = None, *, replicas: int = 1, max_concurrency: int = 16,
             call_timeout_s: float = 120.0, start_timeout_s: float = 300.0,
             actor_options: dict[str, Any] | None = None, name: str | None = None) -> ServedTool:
    """``tool`` (a registered id, made with ``config``) in ``replicas`` Ray actors."""
    settings = {"config": config or {}, "replicas": replicas, "max_concurrency": max_concurrency,
                "call_timeout_s": call_timeout_s, "start_timeout_s": start_timeout_s,
                "actor_options": actor_options or {}, "name": name}
    key = _key("ray", tool, settings)
    with _lock:
        if key not in _made:
            from vista_plugin_toolserve.ray_service import RayToolTransport

            _made[key] = served_tool(RayToolTransport(
                tool, config, replicas=replicas, max_concurrency=max_concurrency, call_timeout_s=call_timeout_s,
                start_timeout_s=start_timeout_s, actor_options=actor_options, name=name), on_close=forget)
        return _made[key]


def http_tool(tool: str, url: str | None = None, config: dict[str, Any] | None = None, *, token: str | None = None,
              timeout_s: float = 120.0, threads: int = 16, start_timeout_s: float = 300.0,
              connect_retries: int = 2) -> ServedTool:
    """``tool`` on the tool server at ``url``; without ``url``, on a server this process starts
    (and restarts when it dies), made with ``config``.  A server at ``url`` that is down (at start
    or later) makes calls return error results, each after ``connect_retries`` more tries."""
    if url is not None and config:
        raise ValueError("config= is for a server this process starts; a server at url= already made its tools")
    settings = {"url": url, "config": config or {}, "timeout_s": timeout_s, "threads": threads,
                "connect_retries": connect_retries}
    key = _key("http", tool, settings)
    with _lock:
        if key not in _made:
            from vista_plugin_toolserve.http_client import HttpToolTransport, LocalToolServer

            if url is None:
                server = LocalToolServer(tool, config, threads=threads, start_timeout_s=start_timeout_s)
                try:
                    transport = HttpToolTransport(tool, server=server, token=token, timeout_s=timeout_s)
                except Exception:
                    server.close()
                    raise
            else:
                transport = HttpToolTransport(tool, url, token=token, timeout_s=timeout_s,
                                              connect_retries=connect_retries)
            _made[key] = served_tool(transport, on_close=forget)
        return _made[key]


def forget(tool: ServedTool) -> None:
    """Drop ``tool`` from the per-process cache (it is being closed)."""
    with _lock:
        for key in [key for key, made in _made.items() if made is tool]:
            del _made[key]


def close_all() -> None:
    """Close every served tool this process made (stops managed servers and actors)."""
    with _lock:
        made = list(_made.values())
        _made.clear()
    for tool in made:
        with contextlib.suppress(Exception):  # best effort at shutdown
            tool.close()


atexit.register(close_all)
