"""Running the app with uvicorn: in the foreground (the CLI) or on a background thread (tests,
benchmarks, notebooks).

The background server binds its own socket first so that ``port=0`` works: the OS picks a free
port and the caller reads it back, so parallel tests never collide.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from vista_plugin_envserver.app import ServerSettings, create_app

LOOPBACK = "127.0.0.1"


def _uvicorn_config(app: Any, host: str, port: int, log_level: str) -> uvicorn.Config:
    # No access log: at thousands of requests per second it costs more than the env steps.
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                          timeout_keep_alive=30, lifespan="on")


def serve(settings: ServerSettings, host: str = LOOPBACK, port: int = 8765, log_level: str = "info") -> None:
    """Serve until interrupted (what ``vista env-server`` runs)."""
    uvicorn.Server(_uvicorn_config(create_app(settings), host, port, log_level)).run()


class BackgroundServer:
    """``with BackgroundServer(settings) as server: RemoteEnv(server.url, ...)``."""

    def __init__(self, settings: ServerSettings, host: str = LOOPBACK, port: int = 0,
                 log_level: str = "warning", app: Any = None) -> None:
        self.app = app if app is not None else create_app(settings)
        self.settings = settings
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.host, self.port = self._socket.getsockname()[:2]
        self._server = uvicorn.Server(_uvicorn_config(self.app, self.host, self.port, log_level))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="vista-env-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 30.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the env server did not start on {self.url} within {timeout_s:g} s")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)
        self._socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
