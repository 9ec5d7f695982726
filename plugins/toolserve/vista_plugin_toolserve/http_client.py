"""Calling a tool on a tool server, and a supervised local server that is restarted when it dies.

:class:`HttpToolTransport` talks to any ``vista tool-server`` (``url``).  With a
:class:`LocalToolServer` (no ``url`` given) the transport also owns the server process: when a
call finds it dead (killed, crashed, OOM) the server is started again and the call that was lost
comes back to the model as an error result, so the rollout goes on.  A server someone else runs
is theirs to restart (systemd, Kubernetes); calls to it fail as error results until it is back.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import httpx
import msgpack
from vista_plugin_envserver.codec import CONTENT_TYPE, CodecError

from vista_plugin_toolserve.wire import decode_result, encode_call
from vista_rl import ToolContext, ToolResult, VistaError

TOKEN_ENV_VAR = "VISTA_TOOL_TOKEN"


class ToolServerError(VistaError):
    """A tool server could not be started or reached."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class LocalToolServer:
    """A ``vista_plugin_toolserve.http_server`` child process serving ``tool`` (made with ``config``)."""

    def __init__(self, tool: str, config: dict[str, Any] | None = None, *, host: str = "127.0.0.1",
                 threads: int = 16, start_timeout_s: float = 300.0) -> None:
        import json

        self.tool = tool
        self.config_json = json.dumps(config or {})
        self.host = host
        self.threads = threads
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._log_file: Any = None
        self._start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _start(self) -> None:
        self.port = free_port(self.host)
        command = [sys.executable, "-m", "vista_plugin_toolserve.http_server", "--tool", self.tool,
                   "--config", self.config_json, "--host", self.host, "--port", str(self.port),
                   "--threads", str(self.threads), "--parent-pid", str(os.getpid())]
        # stderr to a file, not a pipe: nobody drains a pipe after start-up, and a full one blocks the server
        if self._log_file is not None:
            self._log_file.close()
        self._log_file = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server process
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self._log_file)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ToolServerError(f"the tool server for {self.tool!r} exited on start:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.close()
        raise ToolServerError(f"the tool server for {self.tool!r} did not start within {self.start_timeout_s:g}s")

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the server's stderr (start-up errors, tracebacks)."""
        if self._log_file is None:
            return ""
        self._log_file.seek(0, os.SEEK_END)
        size = self._log_file.tell()
        self._log_file.seek(max(0, size - limit))
        return self._log_file.read().decode(errors="replace")

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False

    def ensure_running(self, grace_s: float = 2.0) -> bool:
        """Start the server again if it died or stopped answering; ``True`` when it was restarted.
        A dropped connection can arrive before the kernel reports the exit, hence ``grace_s``."""
        with self._lock:
            deadline = time.monotonic() + grace_s
            while self.alive() and time.monotonic() < deadline:
                if self.healthy():
                    return False
                time.sleep(0.1)
            if self._process is not None and self._process.poll() is None:
                self._process.kill()  # alive but not answering: a hung server is replaced too
                self._process.wait(timeout=10)
            self.restarts += 1
            self._start()
            return True

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


class HttpToolTransport:
    """Calls ``tool`` on the server at ``url`` (or on ``server``, which it restarts when dead)."""

    def __init__(self, tool: str, url: str | None = None, *, server: LocalToolServer | None = None,
                 token: str | None = None, timeout_s: float = 120.0, max_connections: int = 64) -> None:
        if (url is None) == (server is None):
            raise ValueError("give exactly one of url= (a running tool server) or server= (a managed one)")
        self.tool_id = tool
        self.server = server
        self._url = url
        token = token or os.environ.get(TOKEN_ENV_VAR) or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(headers=headers, timeout=timeout_s,
                                    limits=httpx.Limits(max_connections=max_connections))
        self._schema = self._fetch_schema()

    @property
    def url(self) -> str:
        return self.server.url if self.server is not None else str(self._url)

    def _fetch_schema(self) -> dict[str, Any]:
        try:
            response = self._client.get(f"{self.url}/tools")
        except httpx.TransportError as exc:
            raise ToolServerError(f"cannot reach the tool server at {self.url}: {exc}") from None
        if response.status_code != 200:
            raise ToolServerError(f"tool server at {self.url} answered {response.status_code}: {response.text[:200]}")
        tools = response.json().get("tools", {})
        if self.tool_id not in tools:
            raise ToolServerError(f"the tool server at {self.url} does not host {self.tool_id!r} "
                                  f"(it hosts {sorted(tools)})")
        return dict(tools[self.tool_id])

    def schema(self) -> dict[str, Any]:
        return self._schema

    def call(self, arguments: Any, context: ToolContext) -> ToolResult:
        body = msgpack.packb(encode_call(self.tool_id, arguments, context), use_bin_type=True)
        try:
            response = self._client.post(f"{self.url}/call", content=body, headers={"content-type": CONTENT_TYPE})
        except httpx.TimeoutException:
            return ToolResult(text=f"Error: {self.tool_id} did not answer in time.", error=True,
                              metadata={"timeout": True})
        except httpx.TransportError as exc:
            return self._lost(exc)
        if response.status_code != 200:
            message = response.text[:300]
            return ToolResult(text=f"Error: the {self.tool_id} server refused the call ({response.status_code}): "
                                   f"{message}", error=True)
        try:
            return decode_result(msgpack.unpackb(response.content, raw=False))
        except (CodecError, ValueError, msgpack.UnpackException) as exc:
            return ToolResult(text=f"Error: unreadable result from the {self.tool_id} server: {exc}", error=True)

    def _lost(self, exc: Exception) -> ToolResult:
        note = ""
        if self.server is not None:
            try:
                if self.server.ensure_running():
                    note = " The server has been restarted; call the tool again."
            except ToolServerError as restart_error:
                note = f" Restarting it failed: {restart_error}"
        return ToolResult(text=f"Error: the {self.tool_id} server was lost during this call "
                               f"({type(exc).__name__}).{note}", error=True, metadata={"worker_lost": True})

    def close(self) -> None:
        self._client.close()
        if self.server is not None:
            self.server.close()
